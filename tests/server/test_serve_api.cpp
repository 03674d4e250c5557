// `tessera serve` end to end through HTTP: chat and completions equal `tessera run` for the same seed and
// settings, SSE framing, models, health, metrics, the web page, and every error in OpenAI's format.
#include <regex>

#include "gguf/gguf_file.h"
#include "gguf/gguf_split.h"
#include "server/serve_test_util.h"

namespace tessera::test {
namespace {

std::string stories() { return (source_dir() / "models/stories260K.gguf").string(); }

TEST(ServeApi, CompletionAndChatEqualTesseraRun) {
  ServeProcess s({"-m", stories(), "-t", "1"});
  auto c = client(s);
  for (uint64_t seed : {7u, 8u}) {
    const json r = post(c, "/v1/completions",
                        {{"model", "stories260K"},
                         {"prompt", "Once upon a time"},
                         {"max_tokens", 40},
                         {"seed", seed},
                         {"temperature", 1.0},
                         {"top_p", 0.9}});
    const std::string want = tessera_run({"-m", stories(), "-p", "Once upon a time", "-n", "40", "--seed",
                                          std::to_string(seed), "--temp", "1.0", "--top-p", "0.9"});
    EXPECT_EQ("Once upon a time" + r["choices"][0]["text"].get<std::string>() + "\n", want) << "seed " << seed;
    EXPECT_EQ(r["object"], "text_completion");
    EXPECT_EQ(r["model"], "stories260K");
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(r["usage"]["prompt_tokens"], 5);  // BOS + 4 pieces
    EXPECT_EQ(r["usage"]["completion_tokens"], 40);
    EXPECT_EQ(r["usage"]["total_tokens"], 45);
  }
  // Chat goes through the chat template (chatml here: the bundled model has none), as `run --chat` does.
  const json chat =
      post(c, "/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}}, {"max_tokens", 30}, {"seed", 3}});
  const std::string want = tessera_run(
      {"-m", stories(), "--chat", "--chat-template", "chatml", "-p", "Tell me a story", "-n", "30", "--seed", "3"});
  const json& msg = chat["choices"][0]["message"];
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["content"].get<std::string>() + "\n", want);
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_TRUE(chat["id"].get<std::string>().starts_with("chatcmpl-"));
  // Greedy with a stop string: `run --stop` ends at the same place.
  const json stopped =
      post(c, "/v1/completions",
           {{"prompt", "Once upon a time"}, {"max_tokens", 100}, {"temperature", 0}, {"stop", "park"}});
  const std::string want_stop =
      tessera_run({"-m", stories(), "-p", "Once upon a time", "-n", "100", "--temp", "0", "--stop", "park"});
  EXPECT_EQ("Once upon a time" + stopped["choices"][0]["text"].get<std::string>() + "\n", want_stop);
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
}

TEST(ServeApi, StreamsAreWellFramedAndEqualTheWholeAnswer) {
  ServeProcess s({"-m", stories(), "-t", "1"});
  auto c = client(s);
  const json ask = {
      {"messages", {{{"role", "system"}, {"content", "You tell stories."}}, {{"role", "user"}, {"content", "A dog"}}}},
      {"max_tokens", 50},
      {"seed", 11}};
  const json whole = post(c, "/v1/chat/completions", ask);
  json streamed = ask;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  auto r = c.Post("/v1/chat/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const auto events = parse_stream(r->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  size_t finish_at = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    EXPECT_EQ(e["id"], events.front()["id"]);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    if (e["choices"].empty()) continue;  // the usage chunk
    const json& ch = e["choices"][0];
    if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    if (!ch["finish_reason"].is_null()) finish_at = i;
  }
  EXPECT_EQ(text, whole["choices"][0]["message"]["content"]);
  EXPECT_EQ(events[finish_at]["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"]);
  // The usage chunk comes last, with no choices, and counts what the whole answer counted.
  EXPECT_EQ(finish_at + 2, events.size());
  EXPECT_TRUE(events.back()["choices"].empty());
  EXPECT_EQ(events.back()["usage"], whole["usage"]);

  // Completions stream text chunks the same way.
  auto rc =
      c.Post("/v1/completions", json{{"prompt", "The cat"}, {"max_tokens", 20}, {"seed", 2}, {"stream", true}}.dump(),
             "application/json");
  ASSERT_TRUE(rc);
  const auto chunks = parse_stream(rc->body);
  std::string ctext;
  for (const auto& e : chunks) {
    EXPECT_EQ(e["object"], "text_completion");
    ctext += e["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "length");
  const json cwhole = post(c, "/v1/completions", {{"prompt", "The cat"}, {"max_tokens", 20}, {"seed", 2}});
  EXPECT_EQ(ctext, cwhole["choices"][0]["text"]);
}

TEST(ServeApi, LogprobsAndEcho) {
  ServeProcess s({"-m", stories(), "-t", "1"});
  auto c = client(s);
  const json chat = post(c, "/v1/chat/completions",
                         {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                          {"max_tokens", 5},
                          {"temperature", 0},
                          {"logprobs", true},
                          {"top_logprobs", 2}});
  const json& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u);
  std::string joined;
  for (const auto& t : content) {
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    ASSERT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]);  // greedy takes the most likely token
    EXPECT_EQ(t["bytes"].size(), t["token"].get<std::string>().size());
    joined += t["token"].get<std::string>();
  }
  EXPECT_EQ(joined, chat["choices"][0]["message"]["content"]);

  const json comp =
      post(c, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}, {"temperature", 0}, {"logprobs", 3}});
  const json& lp = comp["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 4u);
  EXPECT_EQ(lp["token_logprobs"].size(), 4u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 3u);
  EXPECT_EQ(lp["text_offset"][0], 0);

  const json echo =
      post(c, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}, {"temperature", 0}, {"echo", true}});
  const json plain = post(c, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(echo["choices"][0]["text"], "Once" + plain["choices"][0]["text"].get<std::string>());
}

TEST(ServeApi, ModelsHealthMetricsAndPage) {
  ServeProcess s({"-m", stories(), "--alias", "tiny-stories", "--parallel", "2", "-t", "1"});
  auto c = client(s);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  const json m = parse(models->body);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_EQ(m["data"][0]["id"], "tiny-stories");
  EXPECT_EQ(m["data"][0]["object"], "model");
  auto one = c.Get("/v1/models/tiny-stories");
  ASSERT_TRUE(one);
  EXPECT_EQ(parse(one->body)["id"], "tiny-stories");
  expect_error(c.Get("/v1/models/gpt-4"), 404, "invalid_request_error", "model", "model_not_found");

  post(c, "/v1/completions", {{"model", "tiny-stories"}, {"prompt", "Once"}, {"max_tokens", 12}, {"ignore_eos", true}});
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const json h = parse(health->body);
  EXPECT_EQ(h["status"], "ready");
  EXPECT_EQ(h["model_info"]["n_layer"], 5);
  ASSERT_EQ(h["replicas"].size(), 1u);
  const json& rep = h["replicas"][0];
  EXPECT_EQ(rep["parallel"], 2);
  EXPECT_EQ(rep["requests"], 1);
  ASSERT_EQ(rep["nodes"].size(), 1u);
  const json& node = rep["nodes"][0];
  EXPECT_EQ(node["name"], "local");
  EXPECT_EQ(node["status"], "up");
  EXPECT_EQ(node["layers"]["first"], 0);
  EXPECT_EQ(node["layers"]["last"], 4);
  EXPECT_GT(node["memory"]["weights"].get<uint64_t>(), 1000000u);  // the 1.1 MB file's tensors
  EXPECT_GT(node["memory"]["kv_cache"].get<uint64_t>(), 0u);
  EXPECT_GT(node["memory"]["capacity"].get<uint64_t>(), node["memory"]["used"].get<uint64_t>());

  auto missing = c.Get("/no-such-page");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  // Read right after the answers, on a new connection: each answer is counted before it is sent.
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  const std::string& t = metrics->body;
  for (const char* want :
       {"tessera_ready 1", "tessera_http_requests_total{route=\"/v1/completions\",status=\"200\"} 1",
        "tessera_http_requests_total{route=\"other\",status=\"404\"} 1",
        "tessera_requests_total{replica=\"0\",reason=\"length\"} 1", "tessera_generated_tokens_total{replica=\"0\"} 12",
        "tessera_prompt_tokens_total{replica=\"0\"} 2", "tessera_queue_depth{replica=\"0\"} 0",
        "tessera_parallel_sequences{replica=\"0\"} 2", "tessera_time_to_first_token_seconds_count 1",
        "tessera_node_step_seconds{replica=\"0\",node=\"local\"}",
        "tessera_node_memory_bytes{replica=\"0\",node=\"local\",kind=\"weights\"}",
        "tessera_node_link_bytes_total{replica=\"0\",node=\"local\",direction=\"sent\"} 0",
        "# TYPE tessera_decode_tokens_per_second gauge", "# TYPE tessera_prompt_tokens_per_second gauge"}) {
    EXPECT_NE(t.find(want), std::string::npos) << want << "\n" << t;
  }
  // Every sample line is `name{labels} value` or `name value`.
  const std::regex sample(R"(^[a-z_]+(\{([a-z_]+="[^"]*",?)+\})? [-+0-9.eE]+(Inf)?$)");
  size_t start = 0;
  for (size_t nl = t.find('\n'); nl != std::string::npos; start = nl + 1, nl = t.find('\n', start)) {
    const std::string line = t.substr(start, nl - start);
    if (line.empty() || line[0] == '#') continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
  }

  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<script src=\"app.js\""), std::string::npos);
  auto js = c.Get("/app.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_NE(js->body.find("/v1/chat/completions"), std::string::npos);
  EXPECT_EQ(c.Get("/style.css")->status, 200);
  expect_error(c.Get("/missing.js"), 404, "invalid_request_error", nullptr, "unknown_url");
}

TEST(ServeApi, SplitSetIsServedUnderTheSetsName) {
  TempDir dir;
  const auto parts = gguf::write_split(gguf::GgufFile::open(stories()), dir / "stories260K", 3);
  ServeProcess s({"-m", parts.front().string(), "-t", "1"});
  auto c = client(s);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(parse(models->body)["data"][0]["id"], "stories260K");
  const json r =
      post(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 20}, {"temperature", 0}, {"seed", 1}});
  const std::string want = tessera_run({"-m", stories(), "-p", "Once upon a time", "-n", "20", "--temp", "0"});
  EXPECT_EQ("Once upon a time" + r["choices"][0]["text"].get<std::string>() + "\n", want);
}

TEST(ServeApi, ErrorsAreOpenAiErrors) {
  ServeProcess s({"-m", stories(), "-c", "64", "--max-body", "4096", "--api-key", "test-key", "-t", "1"});
  auto c = client(s);
  // No key, then a wrong one: 401 on /v1/*, while /health and the page stay open.
  expect_error(c.Post("/v1/completions", R"({"prompt":"x"})", "application/json"), 401, "invalid_request_error",
               nullptr, "missing_api_key");
  c.set_bearer_token_auth("wrong-key");
  expect_error(c.Get("/v1/models"), 401, "invalid_request_error", nullptr, "invalid_api_key");
  EXPECT_EQ(c.Get("/health")->status, 200);
  c.set_bearer_token_auth("test-key");
  EXPECT_EQ(c.Get("/v1/models")->status, 200);

  auto bad = [&](const std::string& path, const std::string& body) { return c.Post(path, body, "application/json"); };
  const std::string chat = "/v1/chat/completions";
  const std::string comp = "/v1/completions";
  expect_error(bad(chat, "{\"messages\": [}"), 400, "invalid_request_error", nullptr, "invalid_json");
  expect_error(bad(chat, ""), 400, "invalid_request_error", nullptr, "invalid_json");
  expect_error(bad(chat, "[1,2]"), 400, "invalid_request_error", "body", nullptr);
  expect_error(bad(chat, R"({"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]})"), 404,
               "invalid_request_error", "model", "model_not_found");
  expect_error(bad(chat, R"({"messages":"hi"})"), 400, "invalid_request_error", "messages", nullptr);
  expect_error(bad(chat, R"({"messages":[]})"), 400, "invalid_request_error", "messages", nullptr);
  expect_error(bad(chat, R"({"messages":[{"role":"wizard","content":"hi"}]})"), 400, "invalid_request_error",
               "messages[0].role", nullptr);
  expect_error(bad(chat, R"({"messages":[{"role":"user","content":5}]})"), 400, "invalid_request_error",
               "messages[0].content", nullptr);
  expect_error(bad(chat, R"({"max_tokens":4})"), 400, "invalid_request_error", "messages", nullptr);
  const std::string hi = R"("messages":[{"role":"user","content":"hi"}])";
  expect_error(bad(chat, "{" + hi + R"(,"temperature":"hot"})"), 400, "invalid_request_error", "temperature", nullptr);
  expect_error(bad(chat, "{" + hi + R"(,"temperature":3})"), 400, "invalid_request_error", "temperature", nullptr);
  expect_error(bad(chat, "{" + hi + R"(,"top_p":-0.5})"), 400, "invalid_request_error", "top_p", nullptr);
  expect_error(bad(chat, "{" + hi + R"(,"max_tokens":-2})"), 400, "invalid_request_error", "max_tokens", nullptr);
  expect_error(bad(chat, "{" + hi + R"(,"max_tokens":2.5})"), 400, "invalid_request_error", "max_tokens", nullptr);
  expect_error(bad(chat, "{" + hi + R"(,"seed":"x"})"), 400, "invalid_request_error", "seed", nullptr);
  expect_error(bad(chat, "{" + hi + R"(,"stop":["a","b","c","d","e"]})"), 400, "invalid_request_error", "stop",
               nullptr);
  expect_error(bad(chat, "{" + hi + R"(,"n":2})"), 400, "invalid_request_error", "n", nullptr);
  expect_error(bad(chat, "{" + hi + R"(,"frobnicate":true})"), 400, "invalid_request_error", "frobnicate", nullptr);
  // Tools are supported; one without its function is named down to the field.
  expect_error(bad(chat, "{" + hi + R"(,"tools":[{"type":"function"}]})"), 400, "invalid_request_error",
               "tools[0].function", nullptr);
  expect_error(bad(chat, "{" + hi + R"(,"stream_options":{"include_usage":true}})"), 400, "invalid_request_error",
               "stream_options", nullptr);
  // Longer than the 64-token context.
  std::string long_prompt;
  for (int i = 0; i < 40; ++i) long_prompt += "Lily went to the park. ";
  expect_error(bad(comp, json{{"prompt", long_prompt}}.dump()), 400, "invalid_request_error", "prompt",
               "context_length_exceeded");
  expect_error(bad(comp, R"({"prompt":[1, 2, 99999]})"), 400, "invalid_request_error", "prompt", nullptr);
  expect_error(bad(comp, R"({"prompt":["a","b"]})"), 400, "invalid_request_error", "prompt", nullptr);
  expect_error(bad(comp, json{{"prompt", std::string(5000, 'x')}}.dump()), 413, "invalid_request_error", nullptr,
               "request_too_large");
  expect_error(c.Get("/v1/nothing"), 404, "invalid_request_error", nullptr, "unknown_url");
  // After all that, the server still serves.
  const json ok = post(c, comp, {{"prompt", "Once"}, {"max_tokens", 3}, {"ignore_eos", true}});
  EXPECT_EQ(ok["usage"]["completion_tokens"], 3);
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(ServeApi, BodiesAreJsonWhateverTheirContentTypeAndChunkedOnesAreLimitedToo) {
  ServeProcess s({"-m", stories(), "--max-body", "32768", "-t", "1"});
  auto c = client(s);
  // curl -d sends application/x-www-form-urlencoded; a 20 KB body of that type is still read as JSON.
  const json ask = {{"prompt", "Once"}, {"max_tokens", 2}, {"user", std::string(20000, 'u')}};
  auto r = c.Post("/v1/completions", ask.dump(), "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // A chunked body has no Content-Length to refuse up front: it is cut at the limit.
  RawClient raw(s.port());
  std::string chunked = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string piece(4096, ' ');
  for (int i = 0; i < 10; ++i) chunked += "1000\r\n" + piece + "\r\n";
  chunked += "0\r\n\r\n";
  raw.send(chunked);
  const std::string& answer = raw.read_until("}}", std::chrono::seconds(10));
  EXPECT_NE(answer.find("HTTP/1.1 413"), std::string::npos) << answer;
  EXPECT_NE(answer.find("request_too_large"), std::string::npos) << answer;
}

TEST(ServeApi, APortInUseIsAnError) {
  ServeProcess s({"-m", stories(), "-t", "1"});
  // A second server on the same port must fail, not share it (httplib's default SO_REUSEPORT would allow that).
  const auto r = run_command({tessera_bin().string(), "serve", "-m", stories(), "--port", std::to_string(s.port())});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot listen on 127.0.0.1:" + std::to_string(s.port())), std::string::npos) << r.err;
  auto c = client(s);
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST(ServeApi, GarbageNeverCrashesTheServer) {
  ServeProcess s({"-m", stories(), "--max-body", "65536", "-t", "1"});
  const std::vector<std::string> requests = {
      "GARBAGE\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nContent-Length: 10\r\n\r\n{\"pro",
      "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      http_post("/v1/completions", std::string(100, '{')),
      http_post("/v1/completions", "{\"prompt\":\"\\ud800\"}"),
      http_post("/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1e400}"),
      http_post("/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}"),
      http_post("/v1/completions", std::string("{\"prompt\":\"\xff\xfe\"}")),
      "GET /" + std::string(20000, 'a') + " HTTP/1.1\r\n\r\n",
  };
  for (const auto& req : requests) {
    RawClient raw(s.port());
    raw.send(req);
    raw.read_until("\r\n\r\n", std::chrono::milliseconds(500));
  }
  auto c = client(s);
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  const json ok = post(c, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 3}, {"ignore_eos", true}});
  EXPECT_EQ(ok["usage"]["completion_tokens"], 3);
  EXPECT_EQ(s.stop(), 0) << s.log();
}

}  // namespace
}  // namespace tessera::test
