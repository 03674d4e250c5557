// Structured output through `tessera serve` over HTTP on a random-weight model: 50 chat completions with a
// json_schema response_format all parse and validate; json_object streamed; the completions extension fields;
// a too-short max_tokens gives finish_reason "length"; a bad schema is a 400 naming where. Also `tessera run
// --json-schema`.
#include <cstdlib>
#include <fstream>
#include <future>

#include "server/serve_test_util.h"
#include "support/json_validate.h"
#include "support/tiny_model.h"
#include "support/worker_process.h"

namespace tessera::test {
namespace {

const TempDir& scratch() {
  static const TempDir dir;
  return dir;
}

json schema_format() {
  return {{"type", "json_schema"},
          {"json_schema", {{"name", "pet"}, {"strict", true}, {"schema", json::parse(kTestSchema)}}}};
}

// Fifty chat completions constrained by the test schema, four clients at a time (so constrained sequences share
// the server's batches); each must stop by itself with a document the schema accepts.
void expect_fifty_valid_answers(const ServeProcess& s, const std::string& ask, int seed0) {
  const json schema = json::parse(kTestSchema);
  std::vector<std::future<json>> answers;
  for (int i = 0; i < 50; ++i) {
    answers.push_back(std::async(std::launch::async, [&s, &ask, seed0, i] {
      auto c = client(s);
      return post(c, "/v1/chat/completions",
                  {{"messages", {{{"role", "user"}, {"content", ask}}}},
                   {"max_tokens", 600},
                   {"seed", seed0 + i},
                   {"temperature", 1.0},
                   {"response_format", schema_format()}});
    }));
    if (answers.size() % 4 == 0) answers[answers.size() - 4].wait();
  }
  int valid = 0;
  for (auto& a : answers) {
    const json r = a.get();
    ASSERT_TRUE(r.contains("choices")) << r.dump();
    const std::string content = r["choices"][0]["message"]["content"];
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop") << content;
    const json doc = json::parse(content, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << content;
    EXPECT_EQ(json_invalid(doc, schema, schema), "") << content;
    ++valid;
  }
  EXPECT_EQ(valid, 50);
}

TEST(ServeStructured, FiftyChatCompletionsValidateAgainstTheSchema) {
  ServeProcess s({"-m", random_tiny_llama(), "-t", "1", "-c", "1024", "--parallel", "4"});
  expect_fifty_valid_answers(s, "Describe a pet.", 1000);
}

TEST(ServeStructured, JsonObjectStreamsCompletionsFieldsAndLimits) {
  ServeProcess s({"-m", random_tiny_llama(), "-t", "1", "-c", "1024"});
  auto c = client(s);
  // Streamed json_object: the deltas add up to one JSON object.
  auto r = c.Post("/v1/chat/completions",
                  json{{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                       {"max_tokens", 800},
                       {"seed", 5},
                       {"stream", true},
                       {"response_format", {{"type", "json_object"}}}}
                      .dump(),
                  "application/json");
  ASSERT_TRUE(r);
  std::string text;
  std::string finish;
  for (const json& chunk : parse_stream(r->body)) {
    const json& ch = chunk["choices"][0];
    if (ch["delta"].contains("content")) text += ch["delta"]["content"].get<std::string>();
    if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
  }
  if (finish == "stop") {
    EXPECT_TRUE(json::parse(text, nullptr, false).is_object()) << text;
  } else {
    EXPECT_EQ(finish, "length") << text;  // any object may nest deeper than 800 tokens; never a false "stop"
  }
  // /v1/completions: the json_schema extension field.
  const json schema = json::parse(kTestSchema);
  const json done =
      post(c, "/v1/completions", {{"prompt", "{"}, {"max_tokens", 600}, {"seed", 2}, {"json_schema", schema}});
  const std::string out = done["choices"][0]["text"];
  EXPECT_EQ(done["choices"][0]["finish_reason"], "stop") << out;
  EXPECT_EQ(json_invalid(json::parse(out), schema, schema), "") << out;
  // A grammar of its own, and response_format on /v1/completions.
  const json g =
      post(c, "/v1/completions",
           {{"prompt", "x"}, {"max_tokens", 50}, {"seed", 3}, {"grammar", "root ::= (\"yes\" | \"no\") \"!\""}});
  const std::string yn = g["choices"][0]["text"];
  EXPECT_TRUE(yn == "yes!" || yn == "no!") << yn;
  const json o =
      post(c, "/v1/completions",
           {{"prompt", "x"}, {"max_tokens", 800}, {"seed", 4}, {"response_format", {{"type", "json_object"}}}});
  if (o["choices"][0]["finish_reason"] == "stop") {
    EXPECT_TRUE(json::parse(o["choices"][0]["text"].get<std::string>(), nullptr, false).is_object());
  }
  // Too few tokens: "length", and the text is an unfinished document.
  const json cut = post(c, "/v1/chat/completions",
                        {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                         {"max_tokens", 3},
                         {"seed", 1},
                         {"response_format", schema_format()}});
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(json::parse(cut["choices"][0]["message"]["content"].get<std::string>(), nullptr, false).is_discarded());
  // A bad schema: 400 naming the parameter and the schema location.
  json bad = schema_format();
  bad["json_schema"]["schema"]["properties"]["age"] = {{"type", "integer"}, {"minimum", 0}};
  auto e = c.Post("/v1/chat/completions",
                  json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"response_format", bad}}.dump(),
                  "application/json");
  expect_error(e, 400, "invalid_request_error", "response_format.json_schema.schema", nullptr);
  EXPECT_NE(e->body.find("/properties/age"), std::string::npos) << e->body;
  EXPECT_NE(e->body.find("minimum"), std::string::npos) << e->body;
}

TEST(ServeStructured, RunWithJsonSchemaFile) {
  const auto schema_file = scratch() / "schema.json";
  {
    std::ofstream f(schema_file);
    f << kTestSchema;
  }
  const auto r = run_command({tessera_bin().string(), "run", "-m", random_tiny_llama(), "-c", "1024", "-p", "", "-n",
                              "600", "--seed", "9", "--json-schema", schema_file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json schema = json::parse(kTestSchema);
  const json doc = json::parse(r.out);  // the empty prompt, the document, a newline
  EXPECT_EQ(json_invalid(doc, schema, schema), "") << r.out;
  const auto grammar_file = scratch() / "bad.gbnf";
  {
    std::ofstream f(grammar_file);
    f << "root ::= \"a\"\nnext ::= (\n";
  }
  const auto bad = run_command(
      {tessera_bin().string(), "run", "-m", random_tiny_llama(), "-p", "x", "--grammar", grammar_file.string()});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("line 2"), std::string::npos) << bad.err;
}

// The last stage samples: the grammar travels with each step's sampling request to the worker holding the output
// head, which masks there. 50 completions through a two-worker pipeline validate, and a pipeline run equals the
// one-node run token for token.
TEST(ServeStructured, ThroughATwoWorkerPipeline) {
  // The scalar kernels in every process started from here, so the pipeline's logits equal one node's bit for bit
  // (as tests/cluster/test_workers.cpp does).
  setenv("TESSERA_ISA", "scalar", 1);
  WorkerProcess a, b;
  const std::string workers = "a=" + a.address() + ",b=" + b.address();
  const auto schema_file = scratch() / "pipeline-schema.json";
  {
    std::ofstream f(schema_file);
    f << kTestSchema;
  }
  const std::vector<std::string> run = {tessera_bin().string(),
                                        "run",
                                        "-m",
                                        random_tiny_llama(),
                                        "-c",
                                        "1024",
                                        "-p",
                                        "",
                                        "-n",
                                        "600",
                                        "--seed",
                                        "21",
                                        "--json-schema",
                                        schema_file.string()};
  const auto one = run_command(run);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto piped = run;
  piped.insert(piped.end(), {"--workers", workers, "--no-plan"});
  const auto two = run_command(piped);
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out, one.out);

  ServeProcess s(
      {"-m", random_tiny_llama(), "-t", "1", "-c", "1024", "--parallel", "4", "--workers", workers, "--no-plan"});
  expect_fifty_valid_answers(s, "A pet, please.", 2000);
}

}  // namespace
}  // namespace tessera::test
