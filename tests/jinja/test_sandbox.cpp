// The sandbox bounds (loop iterations, macro recursion, output size, no file access, immutable lists) and
// the template line/column that errors name.
#include <gtest/gtest.h>

#include "jinja/error.h"
#include "jinja/template.h"

namespace tessera::jinja {
namespace {

using json = nlohmann::ordered_json;

JinjaError render_error(std::string_view source, const RenderOptions& options = {}, const json& ctx = json::object()) {
  try {
    Template(source).render(ctx, options);
  } catch (const JinjaError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << source;
  return JinjaError(ErrorKind::Type, "none");
}

TEST(JinjaSandbox, LoopIterationsAreBounded) {
  RenderOptions options;
  options.limits.max_loop_iterations = 1000;
  EXPECT_EQ(Template("{% for i in range(10) %}{% for j in range(99) %}{% endfor %}{% endfor %}ok")
                .render(json::object(), options),
            "ok");
  const JinjaError e =
      render_error("{% for i in range(10) %}{% for j in range(100) %}{% endfor %}{% endfor %}", options);
  EXPECT_EQ(e.kind(), ErrorKind::Limit);
  EXPECT_EQ(e.line(), 1);
}

TEST(JinjaSandbox, RecursionIsBounded) {
  RenderOptions options;
  options.limits.max_call_depth = 20;
  const std::string source = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}";
  const JinjaError e = render_error(source, options);
  EXPECT_EQ(e.kind(), ErrorKind::Limit);
  EXPECT_NE(std::string(e.what()).find("macro calls nested deeper than 20"), std::string::npos) << e.what();
  // Bounded recursion that stays under the limit renders.
  EXPECT_EQ(Template("{% macro f(n) %}{% if n < 5 %}{{ n }}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) }}")
                .render(json::object(), options),
            "01234");
}

TEST(JinjaSandbox, OutputSizeIsBounded) {
  RenderOptions options;
  options.limits.max_output_bytes = 1000;
  EXPECT_EQ(render_error("{% for i in range(200) %}0123456789{% endfor %}", options).kind(), ErrorKind::Limit);
  // A set block's captured text counts too.
  EXPECT_EQ(render_error("{% set x %}{% for i in range(200) %}0123456789{% endfor %}{% endset %}", options).kind(),
            ErrorKind::Limit);
  EXPECT_EQ(render_error("{{ 'x' * 100000000000 }}").kind(), ErrorKind::Limit);
}

TEST(JinjaSandbox, NoFilesAndNoMutation) {
  EXPECT_EQ(render_error("{% include 'secret.txt' %}").kind(), ErrorKind::Security);
  EXPECT_EQ(render_error("{% import 'macros.j2' as m %}").kind(), ErrorKind::Security);
  EXPECT_EQ(render_error("{% extends 'base.j2' %}").kind(), ErrorKind::Security);
  const JinjaError e = render_error("{% set l = [1] %}{{ l.append(2) }}");
  EXPECT_EQ(e.kind(), ErrorKind::Security);
  EXPECT_EQ(e.message(), "access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(render_error("{% set d = {} %}{{ d.update({'a': 1}) }}").kind(), ErrorKind::Security);
}

TEST(JinjaSandbox, NestingIsBounded) {
  std::string deep(5000, '(');
  deep = "{{ " + deep + "1" + std::string(5000, ')') + " }}";
  EXPECT_EQ(render_error(deep).kind(), ErrorKind::Limit);
  std::string blocks;
  for (int i = 0; i < 1000; ++i) blocks += "{% if true %}";
  EXPECT_EQ(render_error(blocks).kind(), ErrorKind::Limit);
}

TEST(JinjaErrors, NameTheLineAndColumn) {
  // A syntax error on line 3, at the unexpected token.
  JinjaError e = render_error("line one\n{% if x %}\n{{ a + }}\n{% endif %}");
  EXPECT_EQ(e.kind(), ErrorKind::Syntax);
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 8);  // the unexpected `}}`
  EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  // An unclosed block names where the template ended.
  e = render_error("{% for m in messages %}\n{{ m }}\n");
  EXPECT_EQ(e.kind(), ErrorKind::Syntax);
  EXPECT_NE(e.message().find("endfor"), std::string::npos) << e.message();
  // Runtime errors name the expression's line.
  e = render_error("a\nb\n  {{ 'x' + none }}");
  EXPECT_EQ(e.kind(), ErrorKind::Type);
  EXPECT_EQ(e.line(), 3);
  e = render_error("{% for m in [1] %}\n\n{{ raise_exception('bad role') }}{% endfor %}");
  EXPECT_EQ(e.kind(), ErrorKind::Template);
  EXPECT_EQ(e.message(), "bad role");
  EXPECT_EQ(e.line(), 3);
  e = render_error("\n{{ missing.attr }}");
  EXPECT_EQ(e.kind(), ErrorKind::Undefined);
  EXPECT_EQ(e.line(), 2);
  e = render_error("{{ x | from_json }}", {}, json{{"x", "{}"}});
  EXPECT_NE(e.message().find("from_json"), std::string::npos);
}

TEST(JinjaSemantics, MatchPythonJinja2) {
  const json ctx = json::parse(R"({"d": {"b": 1, "a": [1, 2.5, null, true, "x\u00e9\n"]}, "s": "  Hi There  "})");
  auto r = [&](std::string_view source) { return Template(source).render(ctx, {}); };
  // tojson: json.dumps(ensure_ascii=False) layout, insertion order kept; indent uses ',' without space.
  EXPECT_EQ(r("{{ d | tojson }}"), "{\"b\": 1, \"a\": [1, 2.5, null, true, \"x\u00e9\\n\"]}");
  EXPECT_EQ(r("{{ d | tojson(indent=2) }}"),
            "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true,\n    \"x\u00e9\\n\"\n  ]\n}");
  EXPECT_EQ(r("{{ d.a | tojson(ensure_ascii=true) }}"), "[1, 2.5, null, true, \"x\\u00e9\\n\"]");
  // Python str() of containers.
  EXPECT_EQ(r("{{ d }}"), "{'b': 1, 'a': [1, 2.5, None, True, 'x\u00e9\\n']}");
  // Methods, slicing, filters.
  EXPECT_EQ(r("{{ s.strip().split(' ') }}|{{ s[2:4] }}|{{ s[::-1] | trim }}|{{ s | lower | trim }}"),
            "['Hi', 'There']|Hi|erehT iH|hi there");
  // Markup + str escapes the str operand; ~ does not.
  EXPECT_EQ(r("{{ 'a'|safe + '<b>' }}|{{ 'a'|safe ~ '<b>' }}"), "a&lt;b&gt;|a<b>");
  // Whitespace control with trim_blocks / lstrip_blocks.
  EXPECT_EQ(r("<{% if true %}\n  x\n  {% endif %}\n>"), "<  x\n>");
  EXPECT_EQ(r("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  // Loop controls and the loop variable; a plain set inside a loop does not leak.
  EXPECT_EQ(r("{% set x = 0 %}{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% set x = i %}"
              "{{ loop.index }}{{ '-' if not loop.last }}{% endfor %}{{ x }}"),
            "1-2-3-0");
  EXPECT_EQ(r("{% set ns = namespace(n=0) %}{% for k, v in d | dictsort %}{% set ns.n = ns.n + 1 %}{{ k }}"
              "{% endfor %}{{ ns.n }}"),
            "ab2");
  // Macros with defaults and call blocks.
  EXPECT_EQ(r("{% macro m(a, b='B') %}[{{ a }}{{ b }}{{ caller() if caller is defined }}]{% endmacro %}"
              "{{ m(1) }}{% call m(2, b='c') %}body{% endcall %}"),
            "[1B][2cbody]");
  // Python arithmetic and errors.
  EXPECT_EQ(r("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 1 / 2 }} {{ 2 ** 10 }} {{ 'ab' * 2 }}"),
            "3 -4 1 0.5 1024 abab");
  EXPECT_EQ(render_error("{{ 'a' + 1 }}").kind(), ErrorKind::Type);
  // Python's % formatting, as an operator and as the format filter (one implementation).
  EXPECT_EQ(r("{{ '%s=%d %r %%' % ('a', 2.9, 'b') }}|{{ '%s-%s' | format('x', 1) }}"), "a=2 'b' %|x-1");
  EXPECT_EQ(render_error("{{ '%s %s' | format(1) }}").kind(), ErrorKind::Type);
  EXPECT_EQ(r("{{ strftime_now('%d %b %Y') | length }}"), "11");
}

TEST(JinjaSemantics, StrftimeReadsThePinnedClock) {
  RenderOptions options;
  options.now = parse_iso8601("2026-01-15T12:00:00");
  EXPECT_EQ(Template("{{ strftime_now('%Y-%m-%d %H:%M:%S %A %B %b %d') }}").render(json::object(), options),
            "2026-01-15 12:00:00 Thursday January Jan 15");
  EXPECT_THROW(parse_iso8601("15/01/2026"), Error);
}

}  // namespace
}  // namespace tessera::jinja
