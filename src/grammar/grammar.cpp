// Builder: names rules, lowers repetition to right-recursive helper rules (so a long repetition does not grow the
// matcher's stacks), lays the rules out flat and rejects undefined and left-recursive rules.
#include "grammar/grammar.h"

#include <map>

#include "util/error.h"

namespace tessera::grammar {

namespace {
// A bounded repetition is unrolled into one helper rule per optional copy: this caps what a schema can ask for.
constexpr int kMaxRepeat = 100000;
constexpr size_t kMaxElements = size_t{1} << 22;
constexpr size_t kMaxRules = size_t{1} << 20;
}  // namespace

uint32_t Grammar::find_rule(std::string_view name) const {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<uint32_t>(i);
  }
  fail("grammar has no rule '{}'", name);
}

Sequence literal(std::string_view bytes) {
  Sequence s;
  for (char c : bytes) s.push_back(byte_item(static_cast<uint8_t>(c)));
  return s;
}

Item byte_item(uint8_t b) {
  Item it;
  it.kind = Item::Set;
  it.set.add(b);
  return it;
}

uint32_t Builder::rule(std::string_view name) {
  const auto [at, added] = ids_.emplace(std::string(name), static_cast<uint32_t>(names_.size()));
  if (!added) return at->second;
  names_.emplace_back(name);
  alts_.emplace_back();
  defined_.push_back(false);
  return static_cast<uint32_t>(names_.size() - 1);
}

uint32_t Builder::fresh(std::string_view base) {
  if (names_.size() >= kMaxRules) fail("grammar needs more than {} rules", kMaxRules);
  // Helper names hold a character the text form cannot write, so they never clash with a user's rule.
  names_.push_back(std::string(base) + "~" + std::to_string(++helpers_));
  alts_.emplace_back();
  defined_.push_back(false);
  return static_cast<uint32_t>(names_.size() - 1);
}

void Builder::define(uint32_t rule, std::vector<Sequence> alternatives) {
  if (defined_[rule]) fail("rule '{}' is defined twice", names_[rule]);
  defined_[rule] = true;
  alts_[rule] = std::move(alternatives);
}

Item Builder::group(std::vector<Sequence> alternatives, std::string_view base) {
  if (alternatives.size() == 1 && alternatives[0].size() == 1) return alternatives[0][0];
  Item it;
  it.kind = Item::Rule;
  it.rule = fresh(base);
  define(it.rule, std::move(alternatives));
  return it;
}

Item Builder::repeat(const Item& item, int min, int max, std::string_view base) {
  if (min < 0 || (max >= 0 && max < min)) fail("repetition {{{},{}}} is empty or negative", min, max);
  if (min > kMaxRepeat || max > kMaxRepeat) fail("repetition bound above {} in rule '{}'", kMaxRepeat, base);
  Sequence seq(static_cast<size_t>(min), item);
  Item tail;
  tail.kind = Item::Rule;
  if (max < 0) {
    // star ::= item star | ε: the reference is last, so the matcher replaces the frame instead of pushing one.
    tail.rule = fresh(base);
    define(tail.rule, {Sequence{item, tail}, Sequence{}});
    seq.push_back(tail);
  } else if (max > min) {
    // opt_k ::= item opt_{k-1} | ε, nested so each copy is a tail call too.
    uint32_t inner = fresh(base);
    define(inner, {Sequence{item}, Sequence{}});
    for (int k = min + 1; k < max; ++k) {
      Item in;
      in.kind = Item::Rule;
      in.rule = inner;
      const uint32_t outer = fresh(base);
      define(outer, {Sequence{item, in}, Sequence{}});
      inner = outer;
    }
    tail.rule = inner;
    seq.push_back(tail);
  }
  return group({std::move(seq)}, base);
}

Grammar Builder::finish(std::string_view root) {
  Grammar g;
  g.names = names_;
  for (size_t r = 0; r < names_.size(); ++r) {
    if (!defined_[r]) fail("rule '{}' is used but never defined", names_[r]);
  }
  g.root = g.find_rule(root);

  // Nullable rules (derive the empty string), by fixpoint, then left corners: a rule reachable from itself
  // without consuming a byte would make the matcher expand forever.
  std::vector<bool> nullable(names_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < names_.size(); ++r) {
      if (nullable[r]) continue;
      for (const auto& seq : alts_[r]) {
        bool all = true;
        for (const auto& it : seq) all = all && it.kind == Item::Rule && nullable[it.rule];
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<uint32_t>> corners(names_.size());
  for (size_t r = 0; r < names_.size(); ++r) {
    for (const auto& seq : alts_[r]) {
      for (const auto& it : seq) {
        if (it.kind == Item::Set) break;
        corners[r].push_back(it.rule);
        if (!nullable[it.rule]) break;
      }
    }
  }
  // Iterative depth-first search: helper chains can be a hundred thousand rules deep.
  std::vector<int> mark(names_.size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (uint32_t start = 0; start < names_.size(); ++start) {
    if (mark[start] != 0) continue;
    mark[start] = 1;
    path.push_back({start, 0});
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == corners[r].size()) {
        mark[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t to = corners[r][next++];
      if (mark[to] == 1) fail("rule '{}' is left-recursive (through '{}')", names_[to], names_[r]);
      if (mark[to] == 0) {
        mark[to] = 1;
        path.push_back({to, 0});
      }
    }
  }

  std::map<std::array<uint64_t, 4>, uint32_t> set_ids;
  g.rules.resize(names_.size());
  for (size_t r = 0; r < names_.size(); ++r) {
    for (const auto& seq : alts_[r]) {
      g.rules[r].push_back(static_cast<uint32_t>(g.elements.size()));
      for (const auto& it : seq) {
        if (it.kind == Item::Rule) {
          g.elements.push_back({Op::Ref, it.rule});
          continue;
        }
        const auto [at, added] = set_ids.emplace(it.set.bits, static_cast<uint32_t>(g.sets.size()));
        if (added) g.sets.push_back(it.set);
        g.elements.push_back({Op::Bytes, at->second});
      }
      g.elements.push_back({Op::End, 0});
      if (g.elements.size() > kMaxElements) fail("grammar has more than {} elements", kMaxElements);
    }
  }
  return g;
}

}  // namespace tessera::grammar
