// A compiled byte-level grammar: rules of alternatives, each a sequence of byte sets and rule references, laid
// out flat so the matcher names a position by one index. Repetition and groups are lowered to helper rules.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessera::grammar {

// A set of bytes, one bit each.
struct ByteSet {
  std::array<uint64_t, 4> bits{};

  bool contains(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  void invert() {
    for (auto& w : bits) w = ~w;
  }
  void merge(const ByteSet& o) {
    for (size_t i = 0; i < bits.size(); ++i) bits[i] |= o.bits[i];
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

enum class Op : uint8_t { End, Bytes, Ref };

// Bytes: arg indexes Grammar::sets; Ref: arg is a rule id; End closes an alternative.
struct Element {
  Op op = Op::End;
  uint32_t arg = 0;
};

struct Grammar {
  std::vector<Element> elements;             // every alternative, each followed by an End
  std::vector<std::vector<uint32_t>> rules;  // per rule: the element index where each alternative starts
  std::vector<std::string> names;            // per rule, for messages
  std::vector<ByteSet> sets;                 // the byte sets Bytes elements point at
  uint32_t root = 0;

  uint32_t find_rule(std::string_view name) const;  // throws Error when absent
};

// One item of a sequence while a grammar is being built (before lowering to elements).
struct Item {
  enum Kind { Set, Rule } kind = Set;
  ByteSet set;    // Kind::Set
  uint32_t rule;  // Kind::Rule
};
using Sequence = std::vector<Item>;

// Builds a Grammar rule by rule; checks that every rule is defined and none is left-recursive.
class Builder {
 public:
  // The id of the named rule, declared (undefined) when new.
  uint32_t rule(std::string_view name);
  // A fresh helper rule named after `base`.
  uint32_t fresh(std::string_view base);
  // Adds alternatives to a rule (a rule may be defined once; a second definition is an Error naming it).
  void define(uint32_t rule, std::vector<Sequence> alternatives);
  bool defined(uint32_t rule) const { return defined_[rule]; }

  // Helpers for repetition: a rule matching `item` between min and max times (max < 0: unbounded).
  Item repeat(const Item& item, int min, int max, std::string_view base);
  Item group(std::vector<Sequence> alternatives, std::string_view base);

  // Lays the rules out and validates: undefined rules, left recursion, the root. Throws Error.
  Grammar finish(std::string_view root);

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;  // named (not helper) rules
  std::vector<std::vector<Sequence>> alts_;
  std::vector<bool> defined_;
  size_t helpers_ = 0;
};

// Items for a literal byte string.
Sequence literal(std::string_view bytes);
Item byte_item(uint8_t b);

}  // namespace tessera::grammar
