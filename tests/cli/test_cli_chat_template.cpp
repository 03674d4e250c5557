// `tessera chat-template` as a user runs it: corpus entries rendered through the binary byte for byte, template
// errors exit 1, and the template read from a GGUF file; `run --chat` uses the model's Jinja template.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

using json = nlohmann::ordered_json;

using test::tessera;

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::filesystem::path corpus() { return test::shared_dir() / "fixtures" / "templates"; }

// The context file for one expected.json entry: its variables, the case's messages and (maybe) tools.
json context_of(const json& entry, const json& cases) {
  json ctx = entry["variables"];
  for (const auto& c : cases) {
    if (c["name"] != entry["case"]) continue;
    ctx["messages"] = c["messages"];
    if (entry["has_tools"].get<bool>()) ctx["tools"] = c["tools"];
  }
  return ctx;
}

TEST(CliChatTemplate, CorpusEntriesPrintExactly) {
  ASSERT_TRUE(std::filesystem::exists(corpus() / "expected.json")) << "the template corpus is missing: " << corpus();
  const json cases = json::parse(slurp(corpus() / "cases.json"));
  const json expected = json::parse(slurp(corpus() / "expected.json"));
  test::TempDir dir;
  // A handful across families: tool calls, unicode, strftime_now, Markup escaping, an expected raise.
  const std::vector<std::pair<std::string, std::string>> picks = {
      {"Qwen-Qwen3-0.6B.jinja", "06_tool_call"},
      {"google-gemma-4-31B-it-interleaved.jinja", "05_unicode_and_escapes"},
      {"meetkai-functionary-medium-v3.1.jinja", "06_tool_call"},
      {"Kimi-K3.jinja", "10_long_multi_turn"},
      {"ibm-granite-granite-3.3-2B-Instruct.jinja", "02_system_user"},
      {"google-gemma-2-2b-it.jinja", "02_system_user"},
  };
  int checked = 0;
  for (const auto& entry : expected) {
    const auto pick = std::make_pair(entry["template"].get<std::string>(), entry["case"].get<std::string>());
    if (std::find(picks.begin(), picks.end(), pick) == picks.end()) continue;
    SCOPED_TRACE(pick.first + " / " + pick.second);
    { std::ofstream(dir / "ctx.json") << context_of(entry, cases).dump(); }
    auto r = tessera({"chat-template", "--template", (corpus() / "templates" / pick.first).string(), "--context",
                      (dir / "ctx.json").string(), "--now", "2026-01-15T12:00:00"});
    if (entry["expect_error"].get<bool>()) {
      EXPECT_EQ(r.exit_code, 1);
      EXPECT_TRUE(r.out.empty());
      EXPECT_NE(r.err.find(entry["error"].get<std::string>()), std::string::npos) << r.err;
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.out, entry["output"].get<std::string>());
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(picks.size()));
}

TEST(CliChatTemplate, ErrorsNameTheLine) {
  test::TempDir dir;
  { std::ofstream(dir / "t.jinja") << "{% for m in messages %}\n{{ m.content + 1 }}\n{% endfor %}"; }
  { std::ofstream(dir / "ctx.json") << R"({"messages": [{"role": "user", "content": "hi"}]})"; }
  auto r =
      tessera({"chat-template", "--template", (dir / "t.jinja").string(), "--context", (dir / "ctx.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
  { std::ofstream(dir / "bad.jinja") << "ok\n{% if %}"; }
  r = tessera({"chat-template", "--template", (dir / "bad.jinja").string(), "--context", (dir / "ctx.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
  r = tessera({"chat-template", "--template", (dir / "t.jinja").string(), "--context", (dir / "ctx.json").string(),
               "--now", "yesterday"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--now"), std::string::npos) << r.err;
}

TEST(CliChatTemplate, ModelTemplateIsUsedByChatTemplateAndRun) {
  test::TempDir dir;
  const auto src = gguf::GgufFile::open(test::shared_dir() / "models/stories260K.gguf");
  gguf::GgufWriter w;
  for (const auto& [key, value] : src.metadata().entries()) w.set(key, value);
  // A template that writes BOS first and marks its turns, so the rendering is recognisable.
  w.set("tokenizer.chat_template",
        gguf::Value(std::string("{{ bos_token }}{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n"
                                "{% endfor %}{% if add_generation_prompt %}[ASSISTANT]{% endif %}")));
  for (const auto& t : src.tensors()) {
    const auto data = src.tensor_data(t);
    w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(data.begin(), data.end()));
  }
  w.write(dir / "m.gguf");
  {
    std::ofstream(dir / "ctx.json")
        << R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true})";
  }
  auto r = tessera({"chat-template", "-m", (dir / "m.gguf").string(), "--context", (dir / "ctx.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s>[USER] hi\n[ASSISTANT]");  // stories260K's BOS text is <s>; exact output keeps it

  auto run = tessera({"run", "-m", (dir / "m.gguf").string(), "--chat", "-p", "hello", "-n", "4"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("template jinja (the model's tokenizer.chat_template)"), std::string::npos) << run.err;
  // --chat-template names a hand-written format or a Jinja file instead.
  { std::ofstream(dir / "t.jinja") << "{% for m in messages %}{{ m.content }}{% endfor %}"; }
  run = tessera({"run", "-m", (dir / "m.gguf").string(), "--chat", "--chat-template", (dir / "t.jinja").string(), "-p",
                 "hello", "-n", "4"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("t.jinja"), std::string::npos) << run.err;
  run = tessera({"run", "-m", (dir / "m.gguf").string(), "--chat", "--chat-template", "no-such-format", "-p", "hello"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("chatml"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace tessera
