// Random sentences of a grammar for tests: a walk that picks among the allowed next bytes and ends, once it can,
// with a probability that grows with the length (so strings and lists stay short).
#pragma once

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/matcher.h"

namespace tessera::test {

namespace walk {

// Whether the walk ends here: where it may, more likely the longer the sentence.
inline bool ends(const grammar::Matcher& m, std::mt19937& rng, size_t size) {
  return m.can_end() && (m.finished() || std::uniform_int_distribution<size_t>(0, 40)(rng) < size / 8 + 1);
}

enum class Step { Took, Ended, Stuck };

// Takes one of the bytes that may come next onto `out`; Ended where none may but the sentence is whole.
inline Step random_byte(grammar::Matcher& m, std::mt19937& rng, std::string& out) {
  const grammar::ByteSet next = m.next_bytes();
  std::vector<uint8_t> bytes;
  for (unsigned b = 0; b < 256; ++b) {
    if (next.contains(static_cast<uint8_t>(b))) bytes.push_back(static_cast<uint8_t>(b));
  }
  if (bytes.empty()) return m.can_end() ? Step::Ended : Step::Stuck;
  // Structure bytes first half the time: a uniform pick would mostly wander inside strings.
  uint8_t pick = bytes[std::uniform_int_distribution<size_t>(0, bytes.size() - 1)(rng)];
  for (uint8_t b : bytes) {
    if ((b == '"' || b == ']' || b == '}') && std::uniform_int_distribution<int>(0, 1)(rng) == 0) pick = b;
  }
  if (!m.advance(pick)) return Step::Stuck;
  out += static_cast<char>(pick);
  return Step::Took;
}

}  // namespace walk

// Returns false when the walk did not reach an end within max_bytes.
inline bool random_sentence(std::shared_ptr<const grammar::Grammar> g, std::mt19937& rng, std::string& out,
                            size_t max_bytes = 4000) {
  grammar::Matcher m(std::move(g));
  out.clear();
  while (out.size() < max_bytes) {
    if (walk::ends(m, rng, out.size())) return true;
    const walk::Step step = walk::random_byte(m, rng, out);
    if (step != walk::Step::Took) return step == walk::Step::Ended;
  }
  return false;
}

// The same walk where, a quarter of the steps (every step past half of max_bytes), one of `prefer` that may come
// next is taken whole: the closing tags of free text, which byte by byte a walk would hardly ever complete.
inline bool random_sentence(std::shared_ptr<const grammar::Grammar> g, std::mt19937& rng, std::string& out,
                            std::vector<std::string> prefer, size_t max_bytes = 4000) {
  grammar::Matcher m(std::move(g));
  out.clear();
  while (out.size() < max_bytes) {
    if (walk::ends(m, rng, out.size())) return true;
    if (out.size() > max_bytes / 2 || std::uniform_int_distribution<int>(0, 3)(rng) == 0) {
      std::shuffle(prefer.begin(), prefer.end(), rng);
      bool took = false;
      for (const auto& p : prefer) {
        if (!p.empty() && m.advance(p)) {
          out += p;
          took = true;
          break;
        }
      }
      if (took) continue;
    }
    const walk::Step step = walk::random_byte(m, rng, out);
    if (step != walk::Step::Took) return step == walk::Step::Ended;
  }
  return false;
}

}  // namespace tessera::test
