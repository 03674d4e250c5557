// derive_reasoning: an assistant turn with a sentinel reasoning and a sentinel answer, rendered next to turns
// without reasoning and to the generation prompts (thinking on and off). Where the turns part before the reasoning
// is where its opening marker starts; the text between reasoning and answer is the closing marker (up to the tag
// that names the block again, as Kimi K3's "<|close|>think<|sep|>") and what introduces the answer. The markers
// must read back a second render, or there are none.
#include "chat/derive_reasoning.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>
#include <vector>

#include "chat/sentinel_render.h"
#include "jinja/template.h"

namespace tessera::chat {

namespace {

using Json = nlohmann::ordered_json;
constexpr size_t npos = std::string::npos;
constexpr std::string_view kUser = kSentinelUser;
constexpr std::string_view kReasoning2 = "__tessera_reasoning2__", kAnswer2 = "__tessera_answer2__";

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}
size_t lcp(std::string_view a, std::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}
bool tag_end(char c) { return c == '>' || c == ']'; }
bool tag_start(char c) { return c == '<' || c == '['; }

// Where the text may be cut before s[n]: not inside a marker such as "<|channel": before its unclosed '<' or '['.
size_t cut_prefix(std::string_view s, size_t n) {
  for (size_t i = n; i-- > 0;) {
    if (tag_end(s[i])) return n;
    if (tag_start(s[i])) return i;
  }
  return n;
}

// The thinking switches of the corpus's templates, all on or all off (reasoning_effort "none": Cohere's).
Json switches(bool on) {
  Json s = {{"enable_thinking", on}, {"thinking", on}, {"thinking_mode", on ? "enabled" : "disabled"}};
  if (!on) s["reasoning_effort"] = "none";
  return s;
}

class Renderer {
 public:
  Renderer(std::string_view source, std::string_view bos, std::string_view eos) : bos_(bos), eos_(eos) {
    try {
      template_.emplace(source);
    } catch (const std::exception&) {
    }
  }
  bool ok() const { return template_.has_value(); }

  // The text after the user's sentinel message, or nullopt when the template fails or drops it.
  std::optional<std::string> after_user(const Json& assistant, bool generation_prompt, const Json& vars) const {
    Json messages = Json::array({{{"role", "user"}, {"content", kUser}}});
    if (!assistant.is_null()) messages.push_back(assistant);
    Json ctx = {
        {"messages", messages}, {"add_generation_prompt", generation_prompt}, {"bos_token", bos_}, {"eos_token", eos_}};
    for (const auto& [k, v] : vars.items()) ctx[k] = v;
    return render_after_sentinel_user(*template_, ctx);
  }

 private:
  std::optional<jinja::Template> template_;
  std::string bos_, eos_;
};

Json turn(std::string_view key, std::string_view reasoning, std::string_view answer) {
  Json m = {{"role", "assistant"}, {"content", answer}};
  if (!key.empty()) m[std::string(key)] = reasoning;
  return m;
}

// The letter runs (3 or more) of a marker: the names it carries ("think", "channel", "thought").
std::vector<std::string> names(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : std::string(s) + ' ') {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      cur += c;
      continue;
    }
    if (cur.size() >= 3) out.push_back(cur);
    cur.clear();
  }
  return out;
}

// The closing marker and the answer's introduction from the text between reasoning and answer: the close ends at
// the first tag end where the text so far names the block as its opening did; without such, it is all close.
std::pair<std::string, std::string> split_close(std::string_view mid, std::string_view open) {
  mid = trim(mid);
  const auto open_names = names(open);
  for (size_t i = 0; i < mid.size(); ++i) {
    if (!tag_end(mid[i])) continue;
    const std::string_view head = mid.substr(0, i + 1);
    for (const auto& n : open_names) {
      if (head.find(n) != npos) return {std::string(head), std::string(trim(mid.substr(i + 1)))};
    }
  }
  return {std::string(mid), {}};
}

struct Turn {
  std::string text;            // the model's part up to the answer
  bool starts_inside = false;  // the generation prompt opened the block
};

// The model's part of a rendered turn: after the generation prompt where the turn starts with it, else from the
// turn start `h`; up to the end of the answer. It starts inside the block where that prompt opens it.
std::optional<Turn> model_part(const std::string& render, size_t h, const std::optional<std::string>& prompt,
                               std::string_view answer, const OutputFormat& f) {
  const size_t a = render.find(answer);
  if (a == npos) return std::nullopt;
  size_t from = h;
  Turn t;
  if (prompt) {
    t.starts_inside = prompt_opens_reasoning(*prompt, f);
    if (render.starts_with(*prompt) && prompt->size() <= a) from = prompt->size();
  }
  t.text = render.substr(from, a + answer.size() - from);
  return t;
}

bool reads_back(const Turn& t, const OutputFormat& f, std::string_view reasoning, std::string_view answer) {
  OutputFormat g = f;
  g.starts_in_reasoning = t.starts_inside;
  const auto p = parse_output(t.text, g, true);
  return p.reasoning == reasoning && p.content == answer && p.calls.empty();
}

// Where the opening marker starts in the render `a` (reasoning at `pr`) and what it is. In order: what the model
// writes after the generation prompt (thinking on) up to the reasoning; else from where a render without
// reasoning last agrees (the latest such point that leaves text before the reasoning: Kimi K3's
// "<|open|>think<|sep|>", which its prompt writes too); else the prompt's own text where the turn has none
// (Apriel's "Here are my reasoning steps:"); else the tag right before the reasoning (Qwen 3.5's "<think>", which
// every other render writes as well). h: the turn start as far as the model's part goes.
std::optional<std::pair<size_t, std::string>> find_open(std::string_view a, size_t pr,
                                                        const std::optional<std::string>& prompt,
                                                        const std::array<std::optional<std::string>, 3>& others) {
  auto at = [&](size_t h) -> std::optional<std::pair<size_t, std::string>> {
    while (h < pr && is_ws(a[h])) ++h;
    // A marker starts at a tag: "think<|sep|>" after "<|open|>" is "<|open|>think<|sep|>".
    if (h > 0 && h < pr && !tag_start(a[h]) && tag_end(a[h - 1])) {
      const size_t o = a.rfind(a[h - 1] == '>' ? '<' : '[', h - 1);
      if (o != npos) h = o;
    }
    const std::string_view open = trim(a.substr(h, pr - h));
    if (open.empty()) return std::nullopt;
    return std::pair{h, std::string(open)};
  };
  if (prompt && prompt->size() <= pr && a.starts_with(*prompt)) {
    if (auto o = at(prompt->size())) return o;
  }
  size_t best = npos;
  for (const auto& x : others) {
    if (!x) continue;
    const size_t c = cut_prefix(a, std::min(lcp(a, *x), pr));
    if (!trim(a.substr(c, pr - c)).empty() && (best == npos || c > best)) best = c;
  }
  if (best != npos) return at(best);
  if (prompt) {
    const size_t c = cut_prefix(a, std::min(lcp(a, *prompt), pr));
    const std::string_view rest = trim(std::string_view(*prompt).substr(std::min(c, prompt->size())));
    if (trim(a.substr(c, pr - c)).empty() && !rest.empty() && c < prompt->size())
      return std::pair{c, std::string(rest)};
  }
  const std::string_view before = trim(a.substr(0, pr));
  if (before.empty() || !tag_end(before.back())) return std::nullopt;
  const size_t o = before.rfind(before.back() == '>' ? '<' : '[');
  if (o == npos) return std::nullopt;
  return std::pair{o, std::string(before.substr(o))};
}

// One way of asking for reasoning: the message key and the switches.
std::optional<ReasoningDerivation> try_derive(const Renderer& r, std::string_view key, const Json& on) {
  const Json off = on.empty() ? Json::object() : switches(false);
  const auto a = r.after_user(turn(key, kReasoningSentinel, kAnswerSentinel), false, on);
  if (!a) return std::nullopt;
  const size_t pr = a->find(kReasoningSentinel), pa = a->find(kAnswerSentinel);
  if (pr == npos || pa == npos || pa < pr || a->find(kReasoningSentinel, pr + 1) != npos) return std::nullopt;
  ReasoningDerivation d;
  d.renders = true;
  const auto prompt_on = r.after_user(nullptr, true, on);
  const auto prompt_off = r.after_user(nullptr, true, off);
  const std::array others = {r.after_user(turn({}, {}, kAnswerSentinel), false, on),
                             r.after_user(turn({}, {}, kAnswerSentinel), false, off), prompt_off};
  const auto opening = find_open(*a, pr, prompt_on, others);
  if (!opening) return d;
  const size_t h = opening->first;
  ReasoningMarkup m;
  m.open = opening->second;
  std::tie(m.close, m.answer) = split_close(
      std::string_view(*a).substr(pr + kReasoningSentinel.size(), pa - pr - kReasoningSentinel.size()), m.open);
  if (m.close.empty()) return d;

  OutputFormat f;
  f.reasoning = ReasoningFormat::Derived;
  f.markup = m;
  const auto one = model_part(*a, h, prompt_on, kAnswerSentinel, f);
  const auto a2 = r.after_user(turn(key, kReasoning2, kAnswer2), false, on);
  const auto two = a2 ? model_part(*a2, h, prompt_on, kAnswer2, f) : std::nullopt;
  if (!one || !two || !reads_back(*one, f, kReasoningSentinel, kAnswerSentinel) ||
      !reads_back(*two, f, kReasoning2, kAnswer2))
    return d;
  d.markup = std::move(m);
  d.sample = one->text;
  d.prompt_opens = one->starts_inside;
  if (prompt_off) {
    d.off_prompt = *prompt_off;
    d.off_closes = trim(*prompt_off).ends_with(d.markup->close);
  }
  return d;
}

}  // namespace

ReasoningDerivation derive_reasoning(std::string_view template_source, std::string_view bos, std::string_view eos) {
  const Renderer r(template_source, bos, eos);
  ReasoningDerivation out;
  if (!r.ok()) return out;
  for (const Json& vars : {switches(true), Json::object()}) {
    for (std::string_view key : {"reasoning_content", "reasoning", "thinking"}) {
      auto d = try_derive(r, key, vars);
      if (!d) continue;
      if (d->markup) return std::move(*d);
      out.renders = true;
    }
  }
  return out;
}

void apply_derived_reasoning(OutputFormat& f, const ReasoningDerivation& d) {
  if (!d.markup) return;
  const ReasoningMarkup& m = *d.markup;
  if (m.answer.empty() && m.open == "<think>" && m.close == "</think>") {
    f.reasoning = ReasoningFormat::Think;
  } else if (m.answer.empty() && m.open == "<|channel>thought" && m.close == "<channel|>") {
    f.reasoning = ReasoningFormat::GemmaChannel;
  } else {
    f.reasoning = ReasoningFormat::Derived;
    f.markup = m;
  }
}

}  // namespace tessera::chat
