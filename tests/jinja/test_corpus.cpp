// All 500 entries of ../shared/fixtures/templates (50 real chat templates x 10 conversations) rendered by
// tessera::jinja must equal Python Jinja2's output byte for byte, or fail where Jinja2 raised.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "jinja/error.h"
#include "jinja/template.h"
#include "support/test_paths.h"

namespace tessera::jinja {
namespace {

using json = nlohmann::ordered_json;

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::filesystem::path corpus_dir() { return test::shared_dir() / "fixtures" / "templates"; }

TEST(JinjaCorpus, AllEntriesMatchJinja2) {
  const auto dir = corpus_dir();
  ASSERT_TRUE(std::filesystem::exists(dir / "expected.json")) << "the template corpus is missing: " << dir;
  const json cases = json::parse(slurp(dir / "cases.json"));
  const json expected = json::parse(slurp(dir / "expected.json"));
  std::map<std::string, json> case_by_name;
  for (const auto& c : cases) case_by_name[c["name"].get<std::string>()] = c;
  std::map<std::string, Template> templates;
  RenderOptions options;
  options.now = DateTime{2026, 1, 15, 12, 0, 0};  // the corpus's pinned strftime_now clock

  int rendered = 0, errors = 0;
  for (const auto& e : expected) {
    const std::string name = e["template"].get<std::string>();
    const std::string case_name = e["case"].get<std::string>();
    SCOPED_TRACE(name + " / " + case_name);
    auto it = templates.find(name);
    if (it == templates.end()) it = templates.emplace(name, Template(slurp(dir / "templates" / name))).first;
    const json& c = case_by_name.at(case_name);
    json context = e["variables"];
    context["messages"] = c["messages"];
    if (e["has_tools"].get<bool>()) context["tools"] = c["tools"];
    if (e["expect_error"].get<bool>()) {
      try {
        it->second.render(context, options);
        ADD_FAILURE() << "rendered, but Jinja2 raised " << e["error_type"].get<std::string>();
      } catch (const JinjaError& err) {
        ++errors;
        // raise_exception's message is the template's own text: it must be the same.
        if (e["error_type"] == "TemplateError") {
          EXPECT_EQ(err.kind(), ErrorKind::Template);
          EXPECT_EQ(err.message(), e["error"].get<std::string>());
        }
      }
      continue;
    }
    try {
      const std::string out = it->second.render(context, options);
      EXPECT_EQ(out, e["output"].get<std::string>());
      ++rendered;
    } catch (const JinjaError& err) {
      ADD_FAILURE() << err.what();
    }
  }
  EXPECT_EQ(rendered + errors, static_cast<int>(expected.size()));
  EXPECT_EQ(expected.size(), 500u);
}

}  // namespace
}  // namespace tessera::jinja
