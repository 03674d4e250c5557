// Request validation (each problem -> the status, param and code OpenAI gives), sampler merging, response and
// chunk shapes, SSE framing both ways, and the Prometheus text helpers.
#include <gtest/gtest.h>

#include "grammar/matcher.h"
#include "server/metrics.h"
#include "server/openai_api.h"
#include "server/sse.h"

namespace tessera::server {
namespace {

using nlohmann::json;

// The ApiError parse_completion_request throws for this body (fails the test when it accepts it).
ApiError reject(const std::string& body, Endpoint e = Endpoint::Chat) {
  try {
    parse_completion_request(body, e);
  } catch (const ApiError& err) {
    return err;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "");
}

const std::string kHi = R"("messages":[{"role":"user","content":"hi"}])";

TEST(OpenAiRequest, ParsesEverySupportedField) {
  const auto r = parse_completion_request(
      R"({"model":"m","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":null,"tool_calls":[]}],
          "temperature":0.5,"top_p":0.9,"top_k":20,"min_p":0.1,"seed":42,"max_tokens":7,"stop":"END","stream":true,
          "stream_options":{"include_usage":true},"frequency_penalty":0.5,"presence_penalty":null,"n":1,
          "logprobs":true,"top_logprobs":3,"user":"u1","response_format":{"type":"text"},"tools":[],"logit_bias":{}})",
      Endpoint::Chat);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_FLOAT_EQ(*r.temperature, 0.5f);
  EXPECT_EQ(*r.top_k, 20);
  EXPECT_EQ(*r.seed, 42u);
  EXPECT_EQ(*r.max_tokens, 7);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_FALSE(r.presence_penalty.has_value());
  EXPECT_EQ(r.logprobs, 3);

  const auto c =
      parse_completion_request(R"({"prompt":[1,2,3],"max_completion_tokens":2,"echo":true})", Endpoint::Completion);
  EXPECT_TRUE(c.prompt_is_tokens);
  EXPECT_EQ(c.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(*c.max_tokens, 2);
  EXPECT_TRUE(c.echo);
  EXPECT_EQ(parse_completion_request(R"({"prompt":["one"]})", Endpoint::Completion).prompt, "one");
}

TEST(OpenAiRequest, EachProblemNamesItsParameter) {
  struct Case {
    std::string body;
    Endpoint endpoint;
    std::string param;
    std::string code;
  };
  const std::vector<Case> cases = {
      {"{", Endpoint::Chat, "", "invalid_json"},
      {"", Endpoint::Chat, "", "invalid_json"},
      {"null", Endpoint::Chat, "body", ""},
      {"{}", Endpoint::Chat, "messages", ""},
      {"{}", Endpoint::Completion, "prompt", ""},
      {R"({"messages":{}})", Endpoint::Chat, "messages", ""},
      {R"({"messages":[1]})", Endpoint::Chat, "messages[0]", ""},
      {R"({"messages":[{"content":"x"}]})", Endpoint::Chat, "messages[0].role", ""},
      {R"({"messages":[{"role":"user"}]})", Endpoint::Chat, "messages[0].content", ""},
      {R"({"messages":[{"role":"tool","content":"x"}]})", Endpoint::Chat, "messages[0].tool_call_id", ""},
      {R"({"messages":[{"role":"robot","content":"x"}]})", Endpoint::Chat, "messages[0].role", ""},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", Endpoint::Chat,
       "messages[0].content[0].type", ""},
      {R"({"messages":[{"role":"user","content":"x","extra":1}]})", Endpoint::Chat, "messages[0].extra", ""},
      {"{" + kHi + R"(,"model":3})", Endpoint::Chat, "model", ""},
      {"{" + kHi + R"(,"temperature":-1})", Endpoint::Chat, "temperature", ""},
      {"{" + kHi + R"(,"temperature":true})", Endpoint::Chat, "temperature", ""},
      {"{" + kHi + R"(,"top_p":2})", Endpoint::Chat, "top_p", ""},
      {"{" + kHi + R"(,"top_k":"5"})", Endpoint::Chat, "top_k", ""},
      {"{" + kHi + R"(,"frequency_penalty":3})", Endpoint::Chat, "frequency_penalty", ""},
      {"{" + kHi + R"(,"seed":-1})", Endpoint::Chat, "seed", ""},
      {"{" + kHi + R"(,"seed":18446744073709551615})", Endpoint::Chat, "seed", ""},
      {"{" + kHi + R"(,"max_tokens":"10"})", Endpoint::Chat, "max_tokens", ""},
      {"{" + kHi + R"(,"stop":[1]})", Endpoint::Chat, "stop[0]", ""},
      {"{" + kHi + R"(,"stop":{}})", Endpoint::Chat, "stop", ""},
      {"{" + kHi + R"(,"stream":"yes"})", Endpoint::Chat, "stream", ""},
      {"{" + kHi + R"(,"n":3})", Endpoint::Chat, "n", ""},
      {"{" + kHi + R"(,"top_logprobs":2})", Endpoint::Chat, "top_logprobs", ""},
      {"{" + kHi + R"(,"logprobs":true,"top_logprobs":99})", Endpoint::Chat, "top_logprobs", ""},
      {"{" + kHi + R"(,"logit_bias":{"5":1}})", Endpoint::Chat, "logit_bias", ""},
      {"{" + kHi + R"(,"tool_choice":"required"})", Endpoint::Chat, "tool_choice", ""},
      {"{" + kHi + R"(,"response_format":{"type":"xml"}})", Endpoint::Chat, "response_format.type", ""},
      {"{" + kHi + R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"strng"}}}})",
       Endpoint::Chat, "response_format.json_schema.schema", ""},
      {"{" + kHi + R"(,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}})", Endpoint::Chat,
       "response_format.json_schema.name", ""},
      {R"({"prompt":"x","grammar":"root ::= ("})", Endpoint::Completion, "grammar", ""},
      {R"({"prompt":"x","json_schema":{"type":"object","required":["a"]}})", Endpoint::Completion, "json_schema", ""},
      {R"({"prompt":"x","grammar":"root ::= \"a\"","response_format":{"type":"json_object"}})", Endpoint::Completion,
       "response_format", ""},
      {"{" + kHi + R"(,"stream_options":{"include_usage":true}})", Endpoint::Chat, "stream_options", ""},
      {"{" + kHi + R"(,"stream":true,"stream_options":{"bogus":1}})", Endpoint::Chat, "stream_options.bogus", ""},
      {"{" + kHi + R"(,"prompt":"x"})", Endpoint::Chat, "prompt", ""},
      {R"({"prompt":"x","messages":[]})", Endpoint::Completion, "messages", ""},
      {R"({"prompt":5})", Endpoint::Completion, "prompt", ""},
      {R"({"prompt":[1,-2]})", Endpoint::Completion, "prompt[1]", ""},
      {R"({"prompt":["a","b"]})", Endpoint::Completion, "prompt", ""},
      {R"({"prompt":"x","logprobs":true})", Endpoint::Completion, "logprobs", ""},
      {R"({"prompt":"x","suffix":"y"})", Endpoint::Completion, "suffix", ""},
      {R"({"prompt":"x","best_of":2})", Endpoint::Completion, "best_of", ""},
      {R"({"prompt":"x","echo":true,"logprobs":1})", Endpoint::Completion, "echo", ""},
  };
  for (const auto& c : cases) {
    const ApiError e = reject(c.body, c.endpoint);
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.type(), "invalid_request_error") << c.body;
    EXPECT_EQ(e.param(), c.param) << c.body << ": " << e.what();
    EXPECT_EQ(e.code(), c.code) << c.body;
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}

TEST(OpenAiRequest, ResponseFormatCompilesAGrammar) {
  const std::string hi = R"("messages":[{"role":"user","content":"hi"}])";
  auto r = parse_completion_request("{" + hi + R"(,"response_format":{"type":"text"}})", Endpoint::Chat);
  EXPECT_TRUE(r.grammar.text.empty());
  r = parse_completion_request("{" + hi + R"(,"response_format":{"type":"json_object"}})", Endpoint::Chat);
  EXPECT_FALSE(r.grammar.text.empty());
  ASSERT_NE(r.grammar.compiled, nullptr);
  // Properties keep the order the request declares (z before a), as OpenAI generates them.
  r = parse_completion_request("{" + hi + R"(,"response_format":{"type":"json_schema","json_schema":{"name":"n",
      "strict":true,"schema":{"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"boolean"}},
      "required":["z","a"]}}}})",
                               Endpoint::Chat);
  ASSERT_NE(r.grammar.compiled, nullptr);
  auto accepts = [&](const std::string& text) {
    grammar::Matcher m(r.grammar.compiled);
    return m.advance(text) && m.can_end();
  };
  EXPECT_TRUE(accepts(R"({"z":1,"a":true})"));
  EXPECT_FALSE(accepts(R"({"a":true,"z":1})"));
  r = parse_completion_request(R"({"prompt":"x","json_schema":{"type":"integer"}})", Endpoint::Completion);
  EXPECT_NE(r.grammar.compiled, nullptr);
  r = parse_completion_request(R"({"prompt":"x","grammar":"root ::= [a-z]+"})", Endpoint::Completion);
  EXPECT_EQ(r.grammar.text, "root ::= [a-z]+");
}

TEST(OpenAiRequest, SamplerMergeKeepsServerDefaultsAndChecksValues) {
  SamplerParams defaults;
  defaults.temperature = 0.7f;
  defaults.top_k = 33;
  auto r = parse_completion_request(R"({"prompt":"x","top_p":0.5,"seed":9})", Endpoint::Completion);
  auto p = merge_sampler(r, defaults);
  EXPECT_FLOAT_EQ(p.temperature, 0.7f);
  EXPECT_EQ(p.top_k, 33);
  EXPECT_FLOAT_EQ(p.top_p, 0.5f);
  EXPECT_EQ(p.seed, 9u);
  EXPECT_EQ(p.repeat_last_n, defaults.repeat_last_n);
  // OpenAI's penalties count the whole sequence.
  r = parse_completion_request(R"({"prompt":"x","presence_penalty":0.4})", Endpoint::Completion);
  p = merge_sampler(r, defaults);
  EXPECT_EQ(p.repeat_last_n, -1);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.4f);
  // top_p = 0 keeps only the best token.
  r = parse_completion_request(R"({"prompt":"x","top_p":0})", Endpoint::Completion);
  p = merge_sampler(r, defaults);
  EXPECT_EQ(p.top_k, 1);
  EXPECT_FLOAT_EQ(p.top_p, 1.0f);
  // A value the sampler refuses (here min_p, range-checked there) names its parameter too.
  r = parse_completion_request(R"({"prompt":"x","top_k":-1})", Endpoint::Completion);
  EXPECT_NO_THROW(merge_sampler(r, defaults));
  r.min_p = 1.5f;
  try {
    merge_sampler(r, defaults);
    ADD_FAILURE() << "min_p 1.5 accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "min_p");
  }
}

TEST(OpenAiResponse, ShapesOfAnswersChunksAndErrors) {
  const ResponseMeta m{"chatcmpl-1", 1700000000, "tiny"};
  const json whole = chat_response_json(m, "Hello", "stop", {5, 2}, nullptr);
  EXPECT_EQ(whole["object"], "chat.completion");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "Hello");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(whole["usage"]["total_tokens"], 7);
  const json first = chat_chunk_json(m, "assistant", "", "", nullptr);
  EXPECT_EQ(first["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const json last = chat_chunk_json(m, "", "", "length", nullptr);
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  const json usage = usage_chunk_json(m, Endpoint::Chat, {3, 4});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
  const json comp = completion_response_json(m, "text", "length", {1, 1}, nullptr);
  EXPECT_EQ(comp["object"], "text_completion");
  EXPECT_EQ(comp["choices"][0]["text"], "text");

  const std::vector<TokenLogprobs> lp = {{"He", -0.5f, {{"He", -0.5f}, {"Hi", -1.0f}}},
                                         {"llo", -std::numeric_limits<float>::infinity(), {}}};
  const json chat_lp = chat_logprobs_json(lp);
  EXPECT_EQ(chat_lp["content"][0]["bytes"], (json{72, 101}));
  EXPECT_EQ(chat_lp["content"][0]["top_logprobs"][1]["token"], "Hi");
  EXPECT_EQ(chat_lp["content"][1]["logprob"], -9999.0);
  const json comp_lp = completion_logprobs_json(lp, 4);
  EXPECT_EQ(comp_lp["text_offset"], (json{4, 6}));
  EXPECT_EQ(comp_lp["top_logprobs"][0]["Hi"], -1.0);

  const json err = error_json(ApiError(404, "no such model", "invalid_request_error", "model", "model_not_found"));
  EXPECT_EQ(err, (json{{"error",
                        {{"message", "no such model"},
                         {"type", "invalid_request_error"},
                         {"param", "model"},
                         {"code", "model_not_found"}}}}));
  EXPECT_TRUE(error_json("x", "server_error")["error"]["param"].is_null());
  // A token piece that splits a UTF-8 character still makes valid JSON text.
  EXPECT_EQ(dump(json("a\xe2\x82")), "\"a\xef\xbf\xbd\"");
}

TEST(Sse, EventsRoundTripInAnyPieces) {
  std::string stream = sse_event(R"({"a":1})") + ": comment\n\n" + sse_event(R"({"b":2})") + std::string(kSseDone);
  EXPECT_EQ(stream, "data: {\"a\":1}\n\n: comment\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n");
  for (size_t piece : {1u, 3u, 1000u}) {
    SseParser p;
    std::vector<std::string> events;
    for (size_t i = 0; i < stream.size(); i += piece) {
      for (auto& e : p.push(std::string_view(stream).substr(i, piece))) events.push_back(e);
    }
    EXPECT_EQ(events, (std::vector<std::string>{R"({"a":1})", R"({"b":2})", "[DONE]"})) << piece;
    EXPECT_EQ(p.bad_lines(), 0);
    EXPECT_TRUE(p.pending().empty());
  }
  SseParser bad;
  bad.push("data: x\nnot sse\n\ndata: y");
  EXPECT_EQ(bad.bad_lines(), 1);
  EXPECT_EQ(bad.pending(), "data: y");
}

TEST(Metrics, HistogramAndLabels) {
  Histogram h;
  h.observe(0.003);
  h.observe(0.2);
  h.observe(500);
  std::string out;
  h.render(out, "x");
  EXPECT_NE(out.find("x_bucket{le=\"0.005\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"0.25\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"120\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_count 3\n"), std::string::npos) << out;
  EXPECT_EQ(prometheus_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

}  // namespace
}  // namespace tessera::server
