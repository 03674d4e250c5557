// Free-text rules (free_text.h): the product of a KMP automaton over the stop tag (how much of the tag the text
// ends with) and a UTF-8 automaton (how many continuation bytes are due), one rule per reachable pair, each byte
// class leading to the next pair; a byte that would complete the tag inside the text has no transition.
#include "grammar/free_text.h"

#include <fmt/format.h>

#include <array>
#include <map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/parser.h"
#include "util/error.h"

namespace tessera::grammar {

namespace {

// UTF-8 states: 0 at a character boundary, 1..3 continuation bytes due, then the leads with a narrower second byte
// (E0, ED, F0, F4: no overlong forms, no surrogates, nothing past U+10FFFF).
int utf8_next(int u, uint8_t b) {
  const bool cont = b >= 0x80 && b <= 0xbf;
  switch (u) {
    case 0:
      if (b == '\t' || b == '\n' || b == '\r' || (b >= 0x20 && b <= 0x7f)) return 0;
      if (b >= 0xc2 && b <= 0xdf) return 1;
      if (b == 0xe0) return 4;
      if (b == 0xed) return 5;
      if ((b >= 0xe1 && b <= 0xec) || b == 0xee || b == 0xef) return 2;
      if (b == 0xf0) return 6;
      if (b >= 0xf1 && b <= 0xf3) return 3;
      if (b == 0xf4) return 7;
      return -1;
    case 1:
      return cont ? 0 : -1;
    case 2:
      return cont ? 1 : -1;
    case 3:
      return cont ? 2 : -1;
    case 4:
      return b >= 0xa0 && b <= 0xbf ? 1 : -1;
    case 5:
      return b >= 0x80 && b <= 0x9f ? 1 : -1;
    case 6:
      return b >= 0x90 && b <= 0xbf ? 2 : -1;
    case 7:
      return b >= 0x80 && b <= 0x8f ? 2 : -1;
  }
  return -1;
}

// delta[q][b]: the length of the longest prefix of `stop` that the text ends with after byte b, from q matched.
std::vector<std::array<uint32_t, 256>> kmp_automaton(std::string_view stop) {
  const size_t m = stop.size();
  std::vector<std::array<uint32_t, 256>> delta(m);
  uint32_t restart = 0;  // the state the text after the first byte of the match would be in
  for (size_t q = 0; q < m; ++q) {
    for (unsigned b = 0; b < 256; ++b) delta[q][b] = q == 0 ? 0 : delta[restart][b];
    delta[q][static_cast<uint8_t>(stop[q])] = static_cast<uint32_t>(q + 1);
    if (q > 0) restart = delta[restart][static_cast<uint8_t>(stop[q])];
  }
  return delta;
}

std::string class_text(const ByteSet& set) {
  std::string out = "[";
  for (unsigned b = 0; b < 256;) {
    if (!set.contains(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    unsigned e = b;
    while (e + 1 < 256 && set.contains(static_cast<uint8_t>(e + 1))) ++e;
    out += fmt::format("\\x{:02x}", b);
    if (e > b) out += fmt::format("-\\x{:02x}", e);
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

std::string text_until_rules(const std::string& name, std::string_view lead, std::string_view stop,
                             const std::vector<std::string>& avoid) {
  if (stop.empty()) fail("free text needs a closing tag");
  // One automaton per tag: the closing one first, then those the text must not hold either.
  std::vector<std::string> tags{std::string(stop)};
  for (const auto& t : avoid) {
    if (t.empty()) fail("free text cannot avoid an empty tag");
    tags.push_back(t);
  }
  std::vector<std::vector<std::array<uint32_t, 256>>> delta;
  for (const auto& t : tags) delta.push_back(kmp_automaton(t));
  using State = std::pair<std::vector<uint32_t>, int>;  // per tag how much the text ends with; the UTF-8 state
  auto step = [&](std::vector<uint32_t>& q, uint8_t b) {
    bool complete = false;  // some tag completed
    for (size_t k = 0; k < tags.size(); ++k) {
      q[k] = delta[k][q[k]][b];
      complete = complete || q[k] == tags[k].size();
    }
    return complete;
  };
  const std::string tail = std::string(lead) + std::string(stop);
  // Whether the text may end here: lead and stop then complete the closing tag at their very end, and no tag before.
  auto may_end = [&](std::vector<uint32_t> q) {
    for (size_t i = 0; i < tail.size(); ++i) {
      if (!step(q, static_cast<uint8_t>(tail[i]))) continue;
      for (size_t k = 1; k < tags.size(); ++k) {
        if (q[k] == tags[k].size()) return false;
      }
      return i + 1 == tail.size() && q[0] == stop.size();
    }
    return false;
  };
  const State start{std::vector<uint32_t>(tags.size(), 0), 0};
  std::map<State, size_t> ids{{start, 0}};
  std::vector<State> states{start};
  std::string rules;
  bool ends = false;
  for (size_t s = 0; s < states.size(); ++s) {
    const State here = states[s];
    std::map<State, ByteSet> moves;
    for (unsigned b = 0; b < 256; ++b) {
      const int u2 = utf8_next(here.second, static_cast<uint8_t>(b));
      std::vector<uint32_t> q = here.first;
      if (u2 < 0 || step(q, static_cast<uint8_t>(b))) continue;
      moves[{std::move(q), u2}].add(static_cast<uint8_t>(b));
    }
    std::string body;
    if (here.second == 0 && may_end(here.first)) {
      body = quote_literal(tail);
      ends = true;
    }
    for (const auto& [to, set] : moves) {
      const auto [it, fresh] = ids.try_emplace(to, states.size());
      if (fresh) states.push_back(to);
      body += fmt::format("{}{} {}-{}", body.empty() ? "" : " | ", class_text(set), name, it->second);
    }
    rules += fmt::format("{}-{} ::= {}\n", name, s, body);
  }
  if (!ends) fail("no text can precede '{}' here: '{}' holds a tag", stop, tail);
  return fmt::format("{} ::= {}-0\n", name, name) + rules;
}

std::string text_char_rule(const std::string& name, uint8_t excluded) {
  // Each lead byte class with the continuation classes it needs (as utf8_next walks them).
  std::string body;
  ByteSet ascii;
  for (unsigned b = 0; b < 0x80; ++b) {
    if (utf8_next(0, static_cast<uint8_t>(b)) == 0 && b != excluded) ascii.add(static_cast<uint8_t>(b));
  }
  body = class_text(ascii);
  for (unsigned b = 0x80; b < 256; ++b) {
    if (b == excluded) continue;
    int u = utf8_next(0, static_cast<uint8_t>(b));
    if (u < 0) continue;
    std::string seq = fmt::format("\"\\x{:02x}\"", b);
    while (u != 0) {
      ByteSet next;
      int to = -1;
      for (unsigned c = 0x80; c < 0xc0; ++c) {
        const int v = utf8_next(u, static_cast<uint8_t>(c));
        if (v < 0) continue;
        next.add(static_cast<uint8_t>(c));
        to = v;
      }
      seq += ' ';
      seq += class_text(next);
      u = to;
    }
    body += " | ";  // appended apart: GCC 12 warns falsely (-Wrestrict) about "literal" + string
    body += seq;
  }
  return fmt::format("{} ::= {}\n", name, body);
}

}  // namespace tessera::grammar
