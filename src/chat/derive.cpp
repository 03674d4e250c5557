// derive_tool_syntax: sentinel conversations rendered through the template and compared. The generation prompt
// and a plain-text answer give the assistant turn's frame (what precedes and follows the model's output); one call,
// two calls, no arguments, two arguments and a number argument give the call pattern, what opens, separates and
// closes calls, and how arguments are written (a list and an object argument: whether as nested markup). The
// result must read its own renders back, or there is none.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "chat/derive_reasoning.h"
#include "chat/derived.h"
#include "chat/sentinel_render.h"
#include "chat/tool_blocks.h"
#include "jinja/template.h"

namespace tessera::chat {

namespace {

using Json = nlohmann::ordered_json;
constexpr size_t npos = std::string::npos;

constexpr std::string_view kUser = kSentinelUser, kText = "__tessera_text__";
constexpr std::string_view kFb = "__tessera_fb__";
constexpr std::string_view kKa = "__tessera_ka__", kVa = "__tessera_va__", kKb = "__tessera_kb__",
                           kVb = "__tessera_vb__", kKc = "__tessera_kc__", kVc = "__tessera_vc__";
constexpr std::string_view kNumber = "918273645";
constexpr std::string_view kId1 = "tessera01", kId2 = "tessera02";  // 9 characters: Mistral's templates insist
// Placeholders for the second call while the two calls are told apart.
constexpr char kName2 = '\x11', kArgs2 = '\x12', kId2Slot = '\x13';

// JSON equality whatever the key order.
bool same_json(std::string_view text, const Json& want) {
  return nlohmann::json::parse(text, nullptr, false) == nlohmann::json::parse(want.dump());
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool blank(std::string_view s) {
  for (char c : s) {
    if (!is_ws(c)) return false;
  }
  return true;
}
bool digit(char c) { return c >= '0' && c <= '9'; }

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
}
bool replace_first(std::string& s, std::string_view from, std::string_view to) {
  const size_t p = s.find(from);
  if (p == npos) return false;
  s.replace(p, from.size(), to);
  return true;
}

// Common prefix / suffix lengths; `digits`: any two digits count as equal (call numbers differ between calls).
size_t lcp(std::string_view a, std::string_view b, bool digits = false) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && (a[n] == b[n] || (digits && digit(a[n]) && digit(b[n])))) ++n;
  return n;
}
size_t lcs(std::string_view a, std::string_view b, bool digits = false) {
  size_t n = 0;
  while (n < a.size() && n < b.size()) {
    const char x = a[a.size() - 1 - n], y = b[b.size() - 1 - n];
    if (x != y && !(digits && digit(x) && digit(y))) break;
    ++n;
  }
  return n;
}

// A prefix must not end inside a marker such as "<|START_": it ends before the unclosed '<' or '['.
size_t cut_prefix(std::string_view s, size_t n) {
  for (size_t i = n; i-- > 0;) {
    if (s[i] == '>' || s[i] == ']') return n;
    if (s[i] == '<' || s[i] == '[') return i;
  }
  return n;
}
// A suffix s[n..] must not start inside a marker such as "|><|END": it starts after the marker's end.
size_t cut_suffix(std::string_view s, size_t n) {
  for (size_t i = n; i < s.size(); ++i) {
    if (s[i] == '<' || s[i] == '[') return n;
    if (s[i] == '>' || s[i] == ']') return i + 1;
  }
  return n;
}

// Two renders of the same pattern (the first and the second call): equal, except digits where the call's number
// goes (kIndex). Empty optional when they differ otherwise.
std::optional<std::string> unify(std::string_view a, std::string_view b) {
  std::string out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && digit(a[i2])) ++i2;
      while (j2 < b.size() && digit(b[j2])) ++j2;
      if (a.substr(i, i2 - i) == b.substr(j, j2 - j)) {
        out += a.substr(i, i2 - i);
      } else {
        out += kIndex;
      }
      i = i2;
      j = j2;
    } else if (a[i] == b[j]) {
      out += a[i++];
      ++j;
    } else {
      return std::nullopt;
    }
  }
  if (i != a.size() || j != b.size()) return std::nullopt;
  return out;
}

Json function(std::string_view name, std::initializer_list<std::pair<std::string_view, const char*>> props) {
  Json p = Json::object();
  for (const auto& [k, type] : props) p[std::string(k)] = {{"type", type}, {"description", "a sentinel argument"}};
  return {{"type", "function"},
          {"function",
           {{"name", name},
            {"description", "A sentinel function."},
            {"parameters", {{"type", "object"}, {"properties", p}, {"required", Json::array()}}}}}};
}

Json call(std::string_view name, Json args, std::string_view id) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", std::move(args)}}}};
}

class Sentinels {
 public:
  Sentinels(std::string_view source, std::string_view bos, std::string_view eos) : bos_(bos), eos_(eos) {
    try {
      template_.emplace(source);
    } catch (const std::exception&) {
    }
    tools_ = Json::array({function(kSentinelName, {{kKa, "string"}, {kKb, "string"}, {"__tessera_kn__", "integer"}}),
                          function(kFb, {{kKc, "string"}})});
  }

  // The text after the user's sentinel message, or nullopt when the template fails or drops it.
  std::optional<std::string> after_user(const Json& assistant, bool generation_prompt) const {
    if (!template_) return std::nullopt;
    Json messages = Json::array({{{"role", "user"}, {"content", kUser}}});
    if (!assistant.is_null()) messages.push_back(assistant);
    const Json ctx = {{"messages", messages},
                      {"add_generation_prompt", generation_prompt},
                      {"tools", tools_},
                      {"bos_token", bos_},
                      {"eos_token", eos_}};
    return render_after_sentinel_user(*template_, ctx);
  }

  std::optional<std::string> calls(Json list) const {
    return after_user({{"role", "assistant"}, {"content", ""}, {"tool_calls", std::move(list)}}, false);
  }

 private:
  std::optional<jinja::Template> template_;
  std::string bos_, eos_;
  Json tools_;
};

// The first piece of a text up to whitespace ("<|im_end|>" in "<|im_end|>\n"), when it starts with a marker.
std::string_view first_marker(std::string_view s) {
  size_t a = 0;
  while (a < s.size() && is_ws(s[a])) ++a;
  s.remove_prefix(a);
  if (s.empty() || (s[0] != '<' && s[0] != '[')) return {};
  size_t n = 0;
  while (n < s.size() && !is_ws(s[n])) ++n;
  return s.substr(0, n);
}

// The model's part of a rendered turn: after the frame's header, before its footer.
struct Frame {
  std::string header;  // what precedes the output in every render
  std::string footer;  // the text after a plain answer (the turn's end)
  std::optional<std::string> cut(const std::optional<std::string>& text) const {
    if (!text || !text->starts_with(header)) return std::nullopt;
    const std::string_view rest = std::string_view(*text).substr(header.size());
    size_t end = cut_suffix(rest, rest.size() - std::min(lcs(rest, footer), rest.size()));
    // The turn's end as the plain answer shows it (e.g. "<SPECIAL_12>") ends the output wherever it comes first
    // after the last sentinel.
    size_t last = rest.rfind("__");
    if (const size_t id = rest.rfind(kId1.substr(0, 8)); id != npos && (last == npos || id > last)) last = id;
    const std::string_view mark = first_marker(footer);
    if (last != npos && !mark.empty()) {
      const size_t at = rest.find(mark, last);
      if (at != npos && at < end) end = at;
    }
    return std::string(rest.substr(0, end));
  }
};

std::optional<Frame> frame(const Sentinels& s, const std::string& one) {
  const auto gen = s.after_user(nullptr, true);
  const auto plain = s.after_user({{"role", "assistant"}, {"content", kText}}, false);
  if (!gen || !plain) return std::nullopt;
  const size_t first = one.find(kSentinelName);
  if (first == npos) return std::nullopt;
  const std::string_view a = one;
  // Where the plain answer and the call start alike is frame, unless nothing would be left to find a call by
  // (then the generation prompt ends the frame, and a reasoning block closed after it is frame too).
  size_t h = cut_prefix(a, std::min(lcp(a, *plain), first));
  if (blank(a.substr(h, first - h))) {
    h = cut_prefix(a, std::min(lcp(a, *gen), first));
    const size_t think = a.substr(0, first).find("</think>", h);
    if (think != npos) h = think + 8;
  }
  Frame f;
  f.header = std::string(a.substr(0, h));
  const size_t text_at = plain->find(kText);
  if (text_at == npos) return std::nullopt;
  f.footer = plain->substr(text_at + kText.size());
  return f;
}

// The span of the JSON object {kKa: kVa} holding the key at `key`; nullopt when the arguments are not JSON.
std::optional<std::pair<size_t, size_t>> json_args_span(std::string_view t, size_t key) {
  const Json want = {{kKa, kVa}};
  for (size_t b = t.rfind('{', key); b != npos; b = b ? t.rfind('{', b - 1) : npos) {
    const auto v = scan_json_value(t, b);
    if (v.status != Scan::Complete || v.end <= key) continue;
    if (Json::parse(t.substr(b, v.end - b), nullptr, false) == want) return std::pair{b, v.end};
    return std::nullopt;
  }
  return std::nullopt;
}

// The slot pattern of a render: sentinels replaced by their slot bytes.
std::string slots(std::string s) {
  replace_all(s, kSentinelName, std::string(1, kName));
  replace_all(s, kFb, std::string(1, kName2));
  replace_all(s, kId1, std::string(1, kId));
  replace_all(s, kId2, std::string(1, kId2Slot));
  return s;
}

bool has_slot(std::string_view s, char lo, char hi) {
  for (char c : s) {
    if (c >= lo && c <= hi) return true;
  }
  return false;
}

// Each slot that reads up to the text after it needs such text in its own pattern; `pairs_open`: the pair
// pattern starts with a literal, which ends a slot right before pair arguments (GLM's "NAME\n<arg_key>").
bool slots_terminated(std::string_view p, bool pairs_open = false) {
  for (size_t k = 0; k < p.size(); ++k) {
    const char c = p[k];
    if (c < kName || c > kValue || c == kArgs) continue;  // arguments end where they stop matching
    size_t j = k + 1;
    while (j < p.size() && is_ws(p[j])) ++j;
    if (j < p.size() && p[j] == kArgs && pairs_open && j + 1 < p.size() && !(p[j + 1] >= kName && p[j + 1] <= kValue))
      continue;
    if (j >= p.size() || (p[j] >= kName && p[j] <= kValue)) return false;
  }
  return true;
}

bool reads_back(const DerivedSyntax& d, const std::string& text,
                const std::vector<std::pair<std::string, Json>>& want) {
  OutputFormat f;
  f.tools = ToolFamily::Derived;
  f.parse_tools = true;
  f.derived = std::make_shared<DerivedSyntax>(d);
  const auto p = parse_output(text, f, true);
  if (p.calls.size() != want.size() || !blank(p.content)) return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (p.calls[i].name != want[i].first || !same_json(p.calls[i].arguments, want[i].second)) return false;
  }
  return true;
}

// Booleans as Python writes them (Qwen 3.5's `| string`: True), and lists and objects as nested markup (MiniMax
// M3): the value of a list [va, vb] is X va Y X vb Y (an item is
// X value Y), the value of an object {kb: vb, kc: vc} is M(kb, vb) M(kc, vc) (a member is M). `head`/`tail`: the
// call around its arguments.
void derive_nested(const Sentinels& s, const Frame& fr, const std::string& head, const std::string& tail,
                   DerivedSyntax& d) {
  const size_t v = d.pair.find(kValue);
  std::string pre = d.pair.substr(0, v), post = d.pair.substr(v + 1);
  replace_all(pre, std::string(1, kKey), kKa);
  replace_all(post, std::string(1, kKey), kKa);
  const auto value = [&](Json arg) -> std::optional<std::string> {
    const auto t = fr.cut(s.calls(Json::array({call(kSentinelName, {{kKa, std::move(arg)}}, kId1)})));
    if (!t || t->size() < head.size() + tail.size() + pre.size() + post.size() || !t->starts_with(head + pre) ||
        !t->ends_with(post + tail))
      return std::nullopt;
    return t->substr(head.size() + pre.size(), t->size() - head.size() - pre.size() - post.size() - tail.size());
  };
  d.python_bools = value(true) == std::optional<std::string>("True");
  const auto patterned = [](std::string p) {
    return !p.empty() && (p[0] < kName || p[0] > kValue) && slots_terminated(p) &&
           std::count(p.begin(), p.end(), kValue) == 1;
  };
  if (const auto list = value(Json::array({kVa, kVb}))) {
    const size_t a = list->find(kVa), b = list->find(kVb);
    if (a != npos && b != npos && a > 0 && b > a) {
      const std::string x = list->substr(0, a), mid = list->substr(a + kVa.size(), b - a - kVa.size());
      const std::string y = mid.size() > x.size() && mid.ends_with(x) ? mid.substr(0, mid.size() - x.size()) : "";
      std::string item = x + kValue + y;
      if (!y.empty() && list->substr(b + kVb.size()) == y && patterned(item)) d.item = std::move(item);
    }
  }
  if (const auto obj = value(Json{{kKb, kVb}, {kKc, kVc}}); obj && obj->size() % 2 == 0) {
    std::string m = obj->substr(0, obj->size() / 2), second = m;
    replace_all(second, kKb, kKc);
    replace_all(second, kVb, kVc);
    replace_all(m, kKb, std::string(1, kKey));
    replace_all(m, kVb, std::string(1, kValue));
    if (second == obj->substr(obj->size() / 2) && m.find(kKey) < m.find(kValue) && patterned(m)) d.member = m;
  }
}

// The pairs form: where the arguments go (q, in the no-argument turn) and one pair's pattern.
bool derive_pairs(const Sentinels& s, const Frame& fr, const std::string& one, DerivedSyntax& d, std::string& t1,
                  std::string& args_raw) {
  const auto zero = fr.cut(s.calls(Json::array({call(kSentinelName, Json::object(), kId1)})));
  const auto two = fr.cut(s.calls(Json::array({call(kSentinelName, {{kKa, kVa}, {kKb, kVb}}, kId1)})));
  if (!zero || !two || one.size() <= zero->size()) return false;
  const size_t grow = one.size() - zero->size();
  const size_t p = lcp(one, *zero), sfx = lcs(one, *zero);
  if (p + sfx < zero->size()) return false;
  size_t q = std::min(p, zero->size());
  const size_t lo = zero->size() - std::min(sfx, zero->size());
  for (size_t c = q + 1; c-- > lo;) {  // the arguments start at a tag where they can
    if (one[c] == '<' || one[c] == '[') {
      q = c;
      break;
    }
  }
  if (q < lo) return false;
  args_raw = one.substr(q, grow);
  std::string pair = args_raw;
  replace_all(pair, kKa, std::string(1, kKey));
  replace_all(pair, kVa, std::string(1, kValue));
  const size_t key = pair.find(kKey), value = pair.find(kValue);
  if (key == npos || value == npos || value < key || pair.find(kValue, value + 1) != npos) return false;
  d.pair = pair;
  // The separator: two pairs between the same frame.
  std::string second = args_raw;
  replace_all(second, kKa, kKb);
  replace_all(second, kVa, kVb);
  const std::string_view head = std::string_view(*zero).substr(0, q), tail = std::string_view(*zero).substr(q);
  const std::string_view t = *two;
  if (!t.starts_with(head) || !t.ends_with(tail)) return false;
  const std::string_view mid = t.substr(head.size(), t.size() - head.size() - tail.size());
  if (mid.size() < args_raw.size() + second.size() || !mid.starts_with(args_raw) || !mid.ends_with(second))
    return false;
  d.pair_sep = std::string(mid.substr(args_raw.size(), mid.size() - args_raw.size() - second.size()));
  // A number: marked apart from strings by some templates (DeepSeek V4's string="false").
  const auto num = fr.cut(s.calls(Json::array({call(kSentinelName, {{kKa, 918273645}}, kId1)})));
  if (num && num->starts_with(head) && num->ends_with(tail) && num->size() > head.size() + tail.size()) {
    std::string n = num->substr(head.size(), num->size() - head.size() - tail.size());
    replace_all(n, kKa, std::string(1, kKey));
    if (replace_first(n, kNumber, std::string(1, kValue)) && n != pair && n.find(kKey) < n.find(kValue)) {
      d.pair_json = n;
    }
  }
  derive_nested(s, fr, std::string(head), std::string(tail), d);
  d.json_args = false;
  t1 = zero->substr(0, q) + kArgs + zero->substr(q);
  return slots_terminated(d.pair) && (d.pair_json.empty() || slots_terminated(d.pair_json));
}

// Open, separator, close and the call pattern from the one-call and two-call patterns.
bool derive_blocks(const std::string& t1, const std::optional<std::string>& t2_opt, DerivedSyntax& d) {
  auto span = [](std::string_view t, char lo, char hi) {
    size_t a = npos, b = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] >= lo && t[i] <= hi) {
        a = std::min(a, i);
        b = i + 1;
      }
    }
    return std::pair{a, b};
  };
  const auto [a1, b1] = span(t1, kName, kId);
  if (a1 == npos) return false;
  const std::string p1 = t1.substr(0, a1), core1 = t1.substr(a1, b1 - a1), q1 = t1.substr(b1);
  d.open = p1;
  d.call = core1;
  d.close = q1;
  d.several = false;
  if (!t2_opt) return true;
  const std::string& t2 = *t2_opt;
  const auto [a, b] = span(t2, kName, kId);
  const auto [c, e] = span(t2, kName2, kId2Slot);
  if (a == npos || c == npos || b > c) return true;
  std::string core2 = t2.substr(c, e - c);
  for (char& ch : core2) {
    if (ch >= kName2 && ch <= kId2Slot) ch = static_cast<char>(ch - 0x10);
  }
  const std::string_view P = std::string_view(t2).substr(0, a), X = std::string_view(t2).substr(b, c - b),
                         Q = std::string_view(t2).substr(e);
  if (P != p1 || Q != q1 || t2.substr(a, b - a) != core1) return true;
  const auto core = unify(core1, core2);
  if (!core) return true;
  size_t head = cut_suffix(X, X.size() - lcs(P, X, true));
  size_t tail = cut_prefix(X, lcp(Q, X, true));
  head = std::max(head, tail);  // where they overlap, the first call's end keeps it
  const std::string_view ph = P.substr(P.size() - (X.size() - head)), qt = Q.substr(0, tail);
  const auto uh = unify(ph, X.substr(head)), ut = unify(qt, X.substr(0, tail));
  if (!uh || !ut) return true;
  d.open = std::string(P.substr(0, P.size() - ph.size()));
  d.call = *uh + *core + *ut;
  d.close = std::string(Q.substr(tail));
  d.sep = std::string(X.substr(tail, head - tail));
  d.several = true;
  return true;
}

std::string find_marker_text(const DerivedSyntax& d) {
  size_t k = 0;
  while (k < d.call.size() && !(d.call[k] >= kName && d.call[k] <= kValue)) ++k;
  std::string s = d.open + d.call.substr(0, k);
  size_t a = 0;
  while (a < s.size() && is_ws(s[a])) ++a;
  s.erase(0, a);
  if (s.empty()) return s;
  const char close = s[0] == '<' ? '>' : s[0] == '[' ? ']' : '\0';
  size_t n = 0;
  if (close) n = s.find(close);
  if (!close || n == npos) {
    n = 0;
    while (n < s.size() && !is_ws(s[n])) ++n;
    return s.substr(0, n);
  }
  return s.substr(0, n + 1);
}

}  // namespace

Derivation derive_tool_syntax(std::string_view template_source, std::string_view bos, std::string_view eos) {
  Derivation out;
  const Sentinels s(template_source, bos, eos);
  const auto one_raw = s.calls(Json::array({call(kSentinelName, {{kKa, kVa}}, kId1)}));
  if (!one_raw || one_raw->find(kSentinelName) == npos) return out;
  const auto fr = frame(s, *one_raw);
  if (!fr) return out;
  const auto one = fr->cut(one_raw);
  if (!one || one->find(kSentinelName) == npos || one->find(kVa) == npos) return out;
  out.sample = *one;
  const auto many_raw = s.calls(Json::array({call(kSentinelName, {{kKa, kVa}}, kId1), call(kFb, {{kKc, kVc}}, kId2)}));
  const auto many = fr->cut(many_raw);
  if (many && many->find(kFb) != npos) out.sample_many = *many;

  DerivedSyntax d;
  std::string t1, args_raw;
  const size_t key = one->find(kKa);
  if (const auto span = key == npos ? std::nullopt : json_args_span(*one, key)) {
    args_raw = one->substr(span->first, span->second - span->first);
    t1 = one->substr(0, span->first) + kArgs + one->substr(span->second);
  } else if (!derive_pairs(s, *fr, *one, d, t1, args_raw)) {
    return out;
  }
  std::optional<std::string> t2;
  if (!out.sample_many.empty()) {
    std::string t = out.sample_many, other = args_raw;
    replace_all(other, kKa, kKc);
    replace_all(other, kVa, kVc);
    if (replace_first(t, args_raw, std::string(1, kArgs)) && replace_first(t, other, std::string(1, kArgs2)))
      t2 = slots(std::move(t));
  }
  t1 = slots(std::move(t1));
  if (has_slot(t1, kName2, kId2Slot) || std::count(t1.begin(), t1.end(), kArgs) != 1) return out;
  if (!derive_blocks(t1, t2, d)) return out;
  const bool pairs_open = !d.json_args && !d.pair.empty() && !(d.pair[0] >= kName && d.pair[0] <= kValue) &&
                          !blank(d.pair.substr(0, d.pair.find_first_of("\x01\x02\x03\x04\x05\x06")));
  if (!slots_terminated(d.call, pairs_open)) return out;
  d.marker = find_marker_text(d);
  if (d.marker.empty()) return out;
  // The syntax must read back what it was learned from.
  const Json a = {{kKa, kVa}}, c = {{kKc, kVc}};
  if (!reads_back(d, out.sample, {{std::string(kSentinelName), a}})) return out;
  if (d.several && !reads_back(d, out.sample_many, {{std::string(kSentinelName), a}, {std::string(kFb), c}}))
    return out;
  const auto two = fr->cut(s.calls(Json::array({call(kSentinelName, {{kKa, kVa}, {kKb, kVb}}, kId1)})));
  if (two && !reads_back(d, *two, {{std::string(kSentinelName), {{kKa, kVa}, {kKb, kVb}}}})) return out;
  // Nested lists and objects must read back too, or they are left to JSON.
  for (const bool list : {true, false}) {
    std::string& nested = list ? d.item : d.member;
    if (nested.empty()) continue;
    const Json arg = list ? Json::array({kVa, kVb}) : Json{{kKb, kVb}, {kKc, kVc}};
    const auto t = fr->cut(s.calls(Json::array({call(kSentinelName, {{kKa, arg}}, kId1)})));
    if (!t || !reads_back(d, *t, {{std::string(kSentinelName), {{kKa, arg}}}})) nested.clear();
  }
  // Arguments given out of order: a template that sorts them (dictsort) writes ka first all the same.
  const auto reversed = fr->cut(s.calls(Json::array({call(kSentinelName, {{kKb, kVb}, {kKa, kVa}}, kId1)})));
  d.sorted_keys = reversed && reversed->find(kKa) != npos && reversed->find(kKa) < reversed->find(kKb);
  out.syntax = std::move(d);
  return out;
}

OutputFormat template_output_format(std::string_view template_source, std::string_view bos, std::string_view eos) {
  OutputFormat f = detect_output_format(template_source);
  if (f.tools == ToolFamily::Harmony) return f;  // gpt-oss's calls are messages of their own: its reader knows them
  apply_derived_reasoning(f, derive_reasoning(template_source, bos, eos));
  const Derivation d = derive_tool_syntax(template_source, bos, eos);
  if (!d.syntax) return f;

  OutputFormat known = f;
  known.parse_tools = true;
  const auto p = parse_output(d.sample, known, true);
  const bool reads = p.calls.size() == 1 && p.calls[0].name == kSentinelName &&
                     same_json(p.calls[0].arguments, Json::parse(kSentinelArguments));
  if (reads) {
    // The family reads these calls (Qwen 3.5's and GLM's XML bodies inside <tool_call>); the derived pairs still
    // say how the model writes them, which a forced call's grammar follows.
    if (!d.syntax->json_args) f.derived = std::make_shared<const DerivedSyntax>(*d.syntax);
    return f;
  }
  f.tools = ToolFamily::Derived;
  f.derived = std::make_shared<const DerivedSyntax>(*d.syntax);
  return f;
}

}  // namespace tessera::chat
