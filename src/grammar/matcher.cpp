// Matcher: stacks expanded until each top is a byte set (rule references pushed, finished frames popped), so
// advancing is a bitmap test per stack. A reference that ends its alternative replaces the frame (a tail call), so
// right recursion such as `item*` does not deepen the stacks.
#include "grammar/matcher.h"

#include <algorithm>

#include "grammar/token_trie.h"
#include "util/error.h"

namespace tessera::grammar {

namespace {
// Expansion steps one push may take before the grammar is called pathological (left recursion is rejected when
// the grammar is built, so this only bounds very long chains of empty rules).
constexpr int kMaxExpansion = 10000;
// Expansion calls one byte may cost in all (empty alternatives can multiply the ways to reach a byte set).
constexpr size_t kMaxWork = 1000000;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}
}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  nodes_.push_back({0, 0, 0, 0x1234567ULL});
  for (uint32_t alt : grammar_->rules[grammar_->root]) expand(alt, kDone, state_, 0);
}

uint32_t Matcher::new_node(uint32_t pos, uint32_t parent) {
  const Node& p = nodes_[parent];
  nodes_.push_back({pos, parent, p.depth + 1, mix(p.hash, pos)});
  return static_cast<uint32_t>(nodes_.size() - 1);
}

bool Matcher::same_stack(uint32_t a, uint32_t b) const {
  while (a != b) {
    const Node& x = nodes_[a];
    const Node& y = nodes_[b];
    if (x.pos != y.pos || x.hash != y.hash || x.depth != y.depth) return false;
    a = x.parent;
    b = y.parent;
  }
  return true;
}

void Matcher::add_stack(uint32_t id, std::vector<uint32_t>& out) const {
  if (nodes_[id].depth > kMaxDepth || out.size() >= kMaxStacks) return;
  for (uint32_t o : out) {
    if (same_stack(o, id)) return;
  }
  out.push_back(id);
}

// Pushes the frames that reading from element `pos` (with `parent` to return to) needs, until byte sets.
void Matcher::expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out, int guard) {
  if (guard > kMaxExpansion) fail("grammar expansion nests deeper than {} (a chain of empty rules?)", kMaxExpansion);
  if (++work_ > kMaxWork)
    fail("grammar expansion takes more than {} steps for one byte (ambiguous empty rules?)", kMaxWork);
  const Grammar& g = *grammar_;
  const Element& e = g.elements[pos];
  switch (e.op) {
    case Op::End:
      if (parent == kDone) {
        add_stack(kDone, out);
      } else {
        const Node p = nodes_[parent];
        expand(p.pos, p.parent, out, guard + 1);
      }
      return;
    case Op::Bytes: {
      const size_t mark = nodes_.size();
      const uint32_t id = new_node(pos, parent);
      const size_t before = out.size();
      add_stack(id, out);
      if (out.size() == before) nodes_.resize(mark);  // a duplicate: its node is garbage already
      return;
    }
    case Op::Ref: {
      uint32_t cont = parent;
      if (g.elements[pos + 1].op != Op::End) {
        cont = new_node(pos + 1, parent);
        if (nodes_[cont].depth > kMaxDepth) return;
      }
      for (uint32_t alt : g.rules[e.arg]) expand(alt, cont, out, guard + 1);
      return;
    }
  }
}

void Matcher::step(std::span<const uint32_t> from, uint8_t byte, std::vector<uint32_t>& to) {
  to.clear();
  work_ = 0;
  const Grammar& g = *grammar_;
  for (uint32_t id : from) {
    if (id == kDone) continue;
    const Node n = nodes_[id];
    if (g.sets[g.elements[n.pos].arg].contains(byte)) expand(n.pos + 1, n.parent, to, 0);
  }
}

bool Matcher::advance(uint8_t byte) {
  step(state_, byte, scratch_);
  if (scratch_.empty()) return false;
  state_.swap(scratch_);
  compact();
  return true;
}

bool Matcher::advance(std::string_view bytes) {
  std::vector<uint32_t> saved = state_;
  for (char c : bytes) {
    step(state_, static_cast<uint8_t>(c), scratch_);
    if (scratch_.empty()) {
      state_ = std::move(saved);  // the nodes saved refers to are still in the arena: compaction comes last
      return false;
    }
    state_.swap(scratch_);
  }
  compact();
  return true;
}

bool Matcher::allows(std::string_view bytes) {
  const size_t mark = nodes_.size();
  std::vector<uint32_t> from = state_, to;
  for (char c : bytes) {
    step(from, static_cast<uint8_t>(c), to);
    if (to.empty()) break;
    from.swap(to);
  }
  nodes_.resize(mark);
  return bytes.empty() || !to.empty();
}

bool Matcher::can_end() const { return std::find(state_.begin(), state_.end(), kDone) != state_.end(); }

bool Matcher::finished() const { return state_.empty() || (state_.size() == 1 && state_[0] == kDone); }

ByteSet Matcher::next_bytes() const {
  ByteSet out;
  for (uint32_t id : state_) {
    if (id != kDone) out.merge(grammar_->sets[grammar_->elements[nodes_[id].pos].arg]);
  }
  return out;
}

// Copies the live stacks into a fresh arena, so a long generation does not grow it.
void Matcher::compact() {
  if (nodes_.size() < 4096) return;
  std::vector<uint32_t> remap(nodes_.size(), UINT32_MAX);
  std::vector<Node> fresh{nodes_[0]};
  remap[0] = 0;
  std::vector<uint32_t> chain;
  for (uint32_t& id : state_) {
    chain.clear();
    uint32_t at = id;
    while (remap[at] == UINT32_MAX) {
      chain.push_back(at);
      at = nodes_[at].parent;
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      Node n = nodes_[*it];
      n.parent = remap[n.parent];
      fresh.push_back(n);
      remap[*it] = static_cast<uint32_t>(fresh.size() - 1);
    }
    id = remap[id];
  }
  nodes_.swap(fresh);
}

std::vector<uint32_t> Matcher::state_key() const {
  std::vector<std::vector<uint32_t>> stacks;
  for (uint32_t id : state_) {
    std::vector<uint32_t> s;
    for (uint32_t at = id; at != kDone; at = nodes_[at].parent) s.push_back(nodes_[at].pos);
    stacks.push_back(std::move(s));
  }
  std::sort(stacks.begin(), stacks.end());
  std::vector<uint32_t> key;
  for (const auto& s : stacks) {
    key.insert(key.end(), s.begin(), s.end());
    key.push_back(UINT32_MAX);
  }
  return key;
}

void Matcher::allowed_tokens(const TokenTrie& trie, std::span<uint64_t> words) {
  if (words.size() * 64 < static_cast<size_t>(trie.n_vocab())) {
    fail("token mask of {} bits for a vocabulary of {}", words.size() * 64, trie.n_vocab());
  }
  std::fill(words.begin(), words.end(), 0);
  if (can_end()) {
    for (int32_t t : trie.end_tokens()) words[static_cast<size_t>(t) / 64] |= uint64_t{1} << (t % 64);
  }
  if (levels_.size() < trie.max_depth() + 1) levels_.resize(trie.max_depth() + 1);
  levels_[0] = state_;
  const size_t mark = nodes_.size();
  walk(trie, 0, 0, words);
  nodes_.resize(mark);
}

// The subtree below trie node `node`, whose prefix leaves the state levels_[depth].
void Matcher::walk(const TokenTrie& trie, uint32_t node, size_t depth, std::span<uint64_t> words) {
  const auto& nodes = trie.nodes();
  const Grammar& g = *grammar_;
  ByteSet first;
  for (uint32_t id : levels_[depth]) {
    if (id != kDone) first.merge(g.sets[g.elements[nodes_[id].pos].arg]);
  }
  const uint32_t end = nodes[node].end;
  for (uint32_t child = node + 1; child < end; child = nodes[child].end) {
    const TokenTrie::Node& c = nodes[child];
    if (!first.contains(c.byte)) continue;  // no stack takes this byte: the whole subtree is dead
    const size_t mark = nodes_.size();
    std::vector<uint32_t>& next = levels_[depth + 1];
    step(levels_[depth], c.byte, next);
    if (!next.empty()) {
      for (int32_t t : trie.tokens(c)) words[static_cast<size_t>(t) / 64] |= uint64_t{1} << (t % 64);
      if (c.end > child + 1) walk(trie, child, depth + 1, words);
    }
    nodes_.resize(mark);
  }
}

}  // namespace tessera::grammar
