// The reader of a derived syntax (derived.h): the learned pattern walked over the output. Literal text matches
// leniently (whitespace may differ where the template wrote whitespace or JSON punctuation); a slot reads up to the
// next literal. JSON arguments stream as they grow; pair arguments come whole, once the call is complete.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "chat/derived.h"
#include "chat/tool_blocks.h"

namespace tessera::chat {

namespace {

constexpr size_t npos = std::string_view::npos;

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_slot(char c) { return c >= kName && c <= kValue; }
bool is_punct(char c) { return c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':'; }

// The literal of `pattern` from `i` up to the next slot.
std::string_view literal_at(std::string_view pattern, size_t i) {
  size_t j = i;
  while (j < pattern.size() && !is_slot(pattern[j])) ++j;
  return pattern.substr(i, j - i);
}

// Matches `lit` at text[i]: whitespace in the text may be added or left out where `lit` has whitespace or JSON
// punctuation, and before it. Complete advances i past the match.
Scan match_literal(std::string_view text, size_t& i, std::string_view lit) {
  size_t t = i;
  char prev = ' ';
  for (size_t k = 0; k < lit.size();) {
    if (is_ws(lit[k])) {
      while (k < lit.size() && is_ws(lit[k])) ++k;
      prev = ' ';
      continue;
    }
    if (is_ws(prev) || is_punct(prev) || is_punct(lit[k])) {
      while (t < text.size() && is_ws(text[t])) ++t;
    }
    if (t >= text.size()) return Scan::Incomplete;
    if (text[t] != lit[k]) return Scan::Invalid;
    prev = lit[k];
    ++t;
    ++k;
  }
  i = t;
  return Scan::Complete;
}

// The first piece of a literal that ends a slot before it: up to whitespace or JSON punctuation.
std::string_view terminator(std::string_view lit) {
  size_t a = 0;
  while (a < lit.size() && is_ws(lit[a])) ++a;
  lit.remove_prefix(a);
  if (lit.empty()) return lit;
  if (is_punct(lit[0])) return lit.substr(0, 1);
  size_t n = 0;
  while (n < lit.size() && !is_ws(lit[n]) && !is_punct(lit[n])) ++n;
  return lit.substr(0, n);
}

bool name_char_ok(char c) {
  return !is_ws(c) && c != '<' && c != '>' && c != '"' && c != '\'' && c != '{' && c != '}' && c != '[' && c != ']' &&
         c != '`' && c != ',' && static_cast<unsigned char>(c) >= 0x20;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

using Json = nlohmann::ordered_json;

Json typed_value(std::string_view raw) {
  auto v = Json::parse(raw, nullptr, false);
  if (!v.is_discarded() && !v.is_string()) return v;
  return std::string(raw);
}

// Walks one pattern (a call or a pair) over the text.
class PatternReader {
 public:
  PatternReader(const DerivedSyntax& syntax, std::string_view text, const TextArguments* text_args)
      : d_(syntax), text_(text), text_args_(text_args) {}

  // A call at text[i]: Complete (i advanced, `call` filled), Incomplete (call: what is known so far; args_started
  // when its arguments have begun) or Invalid.
  Scan call(size_t& i, ToolCall& out, bool& args_started) {
    slots_.clear();
    args_started = false;
    size_t t = i;
    const std::string_view p = d_.call;
    for (size_t k = 0; k < p.size();) {
      if (!is_slot(p[k])) {
        const auto lit = literal_at(p, k);
        Scan s = match_literal(text_, t, lit);
        if (s == Scan::Invalid && k > 0 && p[k - 1] == kArgs) {
          // Members the template writes only sometimes (an "id" after the arguments) are passed over.
          s = skip_members(t, lit);
          if (s == Scan::Complete) s = match_literal(text_, t, lit);
        }
        if (s != Scan::Complete) return s;
        k += lit.size();
        continue;
      }
      const char slot = p[k++];
      if (slot == kArgs) {
        out.name = slots_[kName];
        const Scan s = d_.json_args ? json_args(t, out, args_started) : pair_args(t, out);
        if (s != Scan::Complete) return s;
        continue;
      }
      if (const Scan s = text_slot(t, slot, p, k); s != Scan::Complete) return s;
    }
    out.name = slots_[kName];
    if (out.name.empty()) return Scan::Invalid;
    i = t;
    return Scan::Complete;
  }

 private:
  // A name, id, index, key or value up to the terminator of the literal after it in `p` (from k).
  Scan text_slot(size_t& t, char slot, std::string_view p, size_t k) {
    const auto lit = literal_at(p, k);
    auto end = terminator(lit);
    size_t at = text_.find(end, t);
    std::string_view raw = text_.substr(t, (at == npos ? text_.size() : at) - t);
    if (at == npos) raw.remove_suffix(partial_marker_suffix(raw, end));  // the terminator may be arriving
    if (end.empty() && k + lit.size() < p.size() && p[k + lit.size()] == kArgs && !d_.json_args) {
      // Only whitespace before pair arguments (GLM's "NAME\n<arg_key>"): the first pair, or the literal after
      // the arguments where there are none, ends the slot.
      at = npos;
      size_t hold = 0;
      for (const auto e : {terminator(literal_at(d_.pair, 0)), terminator(literal_at(p, k + lit.size() + 1))}) {
        if (e.empty()) continue;
        const size_t f = text_.find(e, t);
        if (f < at) at = f, end = e;
        hold = std::max(hold, partial_marker_suffix(text_.substr(t), e));
      }
      raw = text_.substr(t, (at == npos ? text_.size() : at) - t);
      if (at == npos) raw.remove_suffix(hold);
    }
    if (slot != kValue) {
      raw = trim(raw);
      for (char c : raw) {
        if (slot == kIndex ? (c < '0' || c > '9') : !name_char_ok(c)) return Scan::Invalid;
      }
    }
    if (at == npos || end.empty()) return Scan::Incomplete;
    if (slot == kValue) {
      // The whitespace the template puts around a value is not part of it.
      size_t a = 0;
      while (a < raw.size() && is_ws(raw[a])) ++a;
      const std::string_view before = prev_lit_;
      size_t keep = 0;
      while (keep < before.size() && keep < raw.size() && is_ws(before[before.size() - 1 - keep])) ++keep;
      raw.remove_prefix(std::min(keep, a));
      size_t lead = 0;
      while (lead < lit.size() && is_ws(lit[lead])) ++lead;
      size_t tail = 0;
      while (tail < lead && tail < raw.size() && is_ws(raw[raw.size() - 1 - tail])) ++tail;
      raw.remove_suffix(tail);
    } else if (raw.empty()) {
      return Scan::Invalid;
    }
    const auto [it, fresh] = slots_.try_emplace(slot, std::string(raw));
    if (!fresh && it->second != raw) return Scan::Invalid;
    t = at;
    return Scan::Complete;
  }

  // `, "key": value` members of the call object before the literal that closes it.
  Scan skip_members(size_t& t, std::string_view lit) {
    size_t a = 0;
    while (a < lit.size() && is_ws(lit[a])) ++a;
    if (a >= lit.size() || lit[a] != '}') return Scan::Invalid;
    size_t u = t;
    for (;;) {
      u = skip_ws(text_, u);
      if (u >= text_.size()) return Scan::Incomplete;
      if (text_[u] != ',') break;
      u = skip_ws(text_, u + 1);
      const auto k = scan_json_string(text_, u);
      if (k.status != Scan::Complete) return k.status;
      u = skip_ws(text_, k.end);
      if (u >= text_.size()) return Scan::Incomplete;
      if (text_[u] != ':') return Scan::Invalid;
      u = skip_ws(text_, u + 1);
      const auto v = scan_json_value(text_, u);
      if (v.status != Scan::Complete) return v.status;
      u = v.end;
    }
    if (u == t) return Scan::Invalid;
    t = u;
    return Scan::Complete;
  }

  Scan json_args(size_t& t, ToolCall& out, bool& started) {
    t = skip_ws(text_, t);
    if (t >= text_.size()) return Scan::Incomplete;
    if (text_[t] != '{') return Scan::Invalid;
    const auto v = scan_json_value(text_, t);
    if (v.status == Scan::Invalid) return Scan::Invalid;
    if (v.status == Scan::Incomplete) {
      out.arguments = std::string(text_.substr(t));
      started = true;
      return Scan::Incomplete;
    }
    out.arguments = std::string(text_.substr(t, v.end - t));
    if (!nlohmann::json::parse(out.arguments, nullptr, false).is_object()) return Scan::Invalid;
    t = v.end;
    return Scan::Complete;
  }

  // Zero or more pairs, separated by pair_sep; the arguments come out as one JSON object.
  Scan pair_args(size_t& t, ToolCall& out) {
    auto args = Json::object();
    const auto saved = slots_;
    for (bool first = true;; first = false) {
      size_t u = t;
      if (!first) {
        const Scan s = match_literal(text_, u, d_.pair_sep);
        if (s == Scan::Incomplete) return Scan::Incomplete;
        if (s == Scan::Invalid) break;
      }
      Value v;
      Scan s = pair(u, d_.pair, out.name, {}, Place::Top, 0, v);
      bool json = false;
      if (s == Scan::Invalid && !d_.pair_json.empty()) {
        s = pair(u, d_.pair_json, out.name, {}, Place::Top, 0, v);
        json = true;
      }
      if (s == Scan::Incomplete) return Scan::Incomplete;
      if (s == Scan::Invalid) break;
      if (v.nested) {
        args[v.key] = std::move(*v.nested);
      } else if (json) {
        args[v.key] = typed_value(v.raw);
      } else {
        const bool text = !d_.pair_json.empty() || text_arg(out.name, v.key);
        if (!text && d_.python_bools && (v.raw == "True" || v.raw == "False")) {
          args[v.key] = v.raw == "True";
        } else {
          args[v.key] = text ? Json(v.raw) : typed_value(v.raw);
        }
      }
      t = u;
    }
    slots_ = saved;
    out.arguments = args.dump(-1, ' ', false, Json::error_handler_t::replace);
    return Scan::Complete;
  }

  bool text_arg(const std::string& function, const std::string& path) const {
    if (!text_args_) return false;
    const auto it = text_args_->find(function);
    return it != text_args_->end() && it->second.contains(path);
  }

  // Where a pattern is read: a call's pair, or inside a nested value a list item or an object member.
  enum class Place { Top, Item, Member };
  struct Value {
    std::string key, raw, path;  // path: as in OutputFormat::text_args
    std::optional<Json> nested;  // a list or object in nested markup (else raw is the value's text)
  };

  // Whether the text at t closes the value (the literal after the value slot at p[k], with the slots read so far
  // written in): then the value is empty text, not nested markup.
  Scan closes_here(size_t t, std::string_view p, size_t k) {
    std::string expect;
    for (; k < p.size(); ++k) {
      if (!is_slot(p[k])) {
        expect += p[k];
      } else if (const auto it = slots_.find(p[k]); it != slots_.end() && p[k] != kValue) {
        expect += it->second;
      } else {
        break;
      }
    }
    return match_literal(text_, t, expect);
  }

  bool opens_like_item(std::string_view member_head, const std::string& key) const {
    std::string head;
    for (char c : member_head) head += c == kKey ? key : std::string(1, c);
    return head == std::string_view(d_.item).substr(0, d_.item.find(kValue));
  }

  // A list (items) or an object (members) in nested markup at text[t].
  Scan nested_value(size_t& t, const std::string& fn, const std::string& path, int depth, Json& out) {
    for (const bool list : {true, false}) {
      const std::string& p = list ? d_.item : d_.member;
      if (p.empty()) continue;
      Json got = list ? Json::array() : Json::object();
      size_t v = t;
      for (;;) {
        size_t w = v;
        Value e;
        const Scan s = pair(w, p, fn, path, list ? Place::Item : Place::Member, depth, e);
        if (s == Scan::Incomplete) return s;
        if (s == Scan::Invalid) break;
        Json value = e.nested ? std::move(*e.nested) : text_arg(fn, e.path) ? Json(e.raw) : typed_value(e.raw);
        if (list) {
          got.push_back(std::move(value));
        } else {
          got[e.key] = std::move(value);
        }
        v = w;
      }
      if (!got.empty()) return t = v, out = std::move(got), Scan::Complete;
    }
    return Scan::Invalid;
  }

  Scan pair(size_t& u, std::string_view p, const std::string& fn, const std::string& parent, Place place, int depth,
            Value& out) {
    const auto outer = slots_;
    slots_.erase(kKey);
    slots_.erase(kValue);
    prev_lit_ = {};
    size_t t = u;
    const bool nests = depth < 16 && (!d_.item.empty() || !d_.member.empty());
    for (size_t k = 0; k < p.size();) {
      if (!is_slot(p[k])) {
        const auto lit = literal_at(p, k);
        if (const Scan s = match_literal(text_, t, lit); s != Scan::Complete) return slots_ = outer, s;
        prev_lit_ = lit;
        k += lit.size();
        continue;
      }
      const char slot = p[k++];
      if (slot == kValue) {
        const std::string& key = slots_[kKey];
        // A nested member's key never starts with '/': that is the enclosing value's closing tag.
        if (place == Place::Member && (key.empty() || key[0] == '/')) return slots_ = outer, Scan::Invalid;
        // Nor does it open like an item (a list read as an object), which also keeps backtracking linear.
        if (place == Place::Member && opens_like_item(p.substr(0, k - 1), key)) return slots_ = outer, Scan::Invalid;
        out.path = place == Place::Top ? key : place == Place::Item ? parent + kItemPath : parent + kMemberPath + key;
        if (nests) {
          Scan s = closes_here(t, p, k);
          if (s == Scan::Invalid) {
            Json got;
            s = nested_value(t, fn, out.path, depth + 1, got);
            if (s == Scan::Complete) {
              out.nested = std::move(got);
              prev_lit_ = {};
              continue;
            }
          }
          if (s == Scan::Incomplete) return slots_ = outer, s;
        }
      }
      if (const Scan s = text_slot(t, slot, p, k); s != Scan::Complete) return slots_ = outer, s;
      prev_lit_ = {};
    }
    out.key = slots_[kKey];
    if (!out.nested) out.raw = slots_[kValue];
    slots_ = outer;
    u = t;
    return Scan::Complete;
  }

  const DerivedSyntax& d_;
  std::string_view text_;
  std::map<char, std::string> slots_;
  std::string_view prev_lit_;
  const TextArguments* text_args_;
};

}  // namespace

CallBlock read_derived_block(const DerivedSyntax& d, std::string_view text, size_t pos, bool final,
                             const TextArguments* text_args) {
  CallBlock b;
  PatternReader reader(d, text, text_args);
  size_t i = pos;
  if (const Scan s = match_literal(text, i, d.open); s != Scan::Complete) return b.status = s, b;
  const bool closed_each = trim(d.close).empty();
  for (bool first = true;; first = false) {
    if (!first) {
      // After a call: the closing text, another call, or (where each call closes itself) the block's end.
      size_t c = i;
      const Scan close = closed_each ? Scan::Invalid : match_literal(text, c, d.close);
      if (close == Scan::Complete) return b.status = Scan::Complete, b.end = c, b;
      size_t n = i;
      Scan next = d.several ? match_literal(text, n, d.sep) : Scan::Invalid;
      ToolCall call;
      bool started = false;
      if (next == Scan::Complete) next = reader.call(n, call, started);
      if (next == Scan::Complete) {
        b.calls.push_back(std::move(call));
        i = n;
        continue;
      }
      if (closed_each && next == Scan::Invalid) return b.status = Scan::Complete, b.end = i, b;
      if (close == Scan::Incomplete || next == Scan::Incomplete) {
        // The model may stop without the closing text: at the end the calls read stand.
        if (final) return b.status = Scan::Complete, b.end = close == Scan::Incomplete ? text.size() : i, b;
        if (next == Scan::Incomplete && started && !call.name.empty()) b.calls.push_back(std::move(call));
        return b.status = Scan::Incomplete, b;
      }
      return b.calls.clear(), b;
    }
    ToolCall call;
    bool started = false;
    const Scan s = reader.call(i, call, started);
    if (s == Scan::Invalid) return b;
    if (s == Scan::Incomplete) {
      if (final) return b;
      if (started && !call.name.empty()) b.calls.push_back(std::move(call));
      return b.status = Scan::Incomplete, b;
    }
    b.calls.push_back(std::move(call));
  }
}

}  // namespace tessera::chat
