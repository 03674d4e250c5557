// ShardedSampler: Sampler's chain split over vocabulary ranges. Penalties touch only the window's tokens, so each
// rank applies them to its own; top-k is the merge of each rank's top k; top-p is NucleusCut's exact cut; a draw
// over the whole vocabulary walks it in one node's order with the running sum passed from rank to rank.
#include "engine/sharded_sampling.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "grammar/constraint.h"
#include "util/error.h"

namespace tessera {
namespace {

using Candidate = ShardedSampler::Candidate;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Sampler's order: higher logit first, then lower token id.
constexpr auto better = [](const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
};

class Out {
 public:
  explicit Out(std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &v, sizeof(T));
  }

 private:
  std::vector<uint8_t>& bytes_;
};

class In {
 public:
  explicit In(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    if (bytes_.size() - at_ < sizeof(T)) fail("sampling across ranks: a message ends early ({} bytes)", bytes_.size());
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  void skip(size_t n) {
    if (bytes_.size() - at_ < n) fail("sampling across ranks: a message ends early ({} bytes)", bytes_.size());
    at_ += n;
  }
  bool at_end() const { return at_ == bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

// The m best of a row, best first (as Sampler::select_best: a bounded heap for small m, else nth_element).
void best_of(std::span<const float> row, int32_t first, size_t m, std::vector<Candidate>& out) {
  out.clear();
  m = std::min(m, row.size());
  if (m == 0) return;
  if (m * 8 <= row.size()) {
    for (size_t i = 0; i < m; ++i) out.push_back({row[i], first + static_cast<int32_t>(i)});
    std::make_heap(out.begin(), out.end(), better);  // front: the worst kept
    for (size_t i = m; i < row.size(); ++i) {
      if (row[i] < out.front().logit) continue;
      const Candidate c{row[i], first + static_cast<int32_t>(i)};
      if (!better(c, out.front())) continue;
      std::pop_heap(out.begin(), out.end(), better);
      out.back() = c;
      std::push_heap(out.begin(), out.end(), better);
    }
  } else {
    for (size_t i = 0; i < row.size(); ++i) out.push_back({row[i], first + static_cast<int32_t>(i)});
    std::nth_element(out.begin(), out.begin() + static_cast<ptrdiff_t>(m) - 1, out.end(), better);
    out.resize(m);
  }
  std::sort(out.begin(), out.end(), better);
}

// Every rank's best candidates (each rank's m best hold the group's m best) cut to the m best, best first.
void merge_best(std::vector<Candidate>& pool, size_t m) {
  if (pool.size() < m) fail("sampling across ranks: {} candidates for the {} best", pool.size(), m);
  std::partial_sort(pool.begin(), pool.begin() + static_cast<ptrdiff_t>(m), pool.end(), better);
  pool.resize(m);
}

}  // namespace

std::vector<SampleSpec> sample_specs(std::span<const SampleRequest> requests) {
  std::vector<SampleSpec> specs(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].sampler == nullptr) fail("sampling request {} has no sampler", i);
    specs[i].params = requests[i].sampler->params();
    specs[i].top_logprobs = requests[i].top_logprobs;
    requests[i].sampler->penalty_counts(specs[i].penalty_tokens, specs[i].penalty_counts);
    if (auto* g = requests[i].sampler->grammar()) {
      const auto words = g->mask();
      if (std::all_of(words.begin(), words.end(), [](uint64_t w) { return w == 0; })) {
        fail("the grammar allows no token of the vocabulary here");
      }
      specs[i].mask.assign(words.begin(), words.end());
    }
  }
  return specs;
}

std::vector<uint8_t> encode_specs(std::span<const SampleSpec> specs) {
  static_assert(std::is_trivially_copyable_v<SamplerParams>);
  std::vector<uint8_t> bytes;
  Out out(bytes);
  out.put(static_cast<uint64_t>(specs.size()));
  for (const SampleSpec& s : specs) {
    out.put(s.params);
    out.put(s.top_logprobs);
    out.put(static_cast<uint64_t>(s.penalty_tokens.size()));
    for (size_t i = 0; i < s.penalty_tokens.size(); ++i) {
      out.put(s.penalty_tokens[i]);
      out.put(s.penalty_counts.at(i));
    }
    out.put(static_cast<uint64_t>(s.mask.size()));
    for (uint64_t w : s.mask) out.put(w);
  }
  return bytes;
}

std::vector<SampleSpec> decode_specs(std::span<const uint8_t> bytes) {
  In in(bytes);
  const auto n = in.get<uint64_t>();
  if (n > bytes.size()) fail("sampling across ranks: a malformed list of {} rows", n);
  std::vector<SampleSpec> specs(n);
  for (SampleSpec& s : specs) {
    s.params = in.get<SamplerParams>();
    s.params.validate();
    s.top_logprobs = in.get<int32_t>();
    const auto n_pen = in.get<uint64_t>();
    if (n_pen > bytes.size()) fail("sampling across ranks: a malformed list of {} penalised tokens", n_pen);
    for (uint64_t i = 0; i < n_pen; ++i) {
      s.penalty_tokens.push_back(in.get<int32_t>());
      s.penalty_counts.push_back(in.get<int32_t>());
    }
    const auto n_mask = in.get<uint64_t>();
    if (n_mask > bytes.size()) fail("sampling across ranks: a malformed mask of {} words", n_mask);
    for (uint64_t i = 0; i < n_mask; ++i) s.mask.push_back(in.get<uint64_t>());
  }
  if (!in.at_end()) fail("sampling across ranks: {} bytes after the rows", bytes.size());
  return specs;
}

void ShardedSampler::sample(collective::Communicator& comm, std::span<const SampleSpec> specs,
                            std::span<const float> logits, int64_t first_token, int64_t n_local, int64_t n_vocab,
                            std::span<const SampleRequest> requests, std::vector<SampledToken>& out) {
  const size_t n_rows = specs.size();
  if (n_local <= 0 || first_token < 0 || first_token + n_local > n_vocab) {
    fail("sampling across ranks: tokens [{}, {}) are not a range of the {}-token vocabulary", first_token,
         first_token + n_local, n_vocab);
  }
  if (logits.size() != n_rows * static_cast<size_t>(n_local)) {
    fail("sampling across ranks: {} logits for {} rows of {}", logits.size(), n_rows, n_local);
  }
  if (comm.rank() == 0 && requests.size() != n_rows) {
    fail("sampling across ranks: {} requests for {} rows", requests.size(), n_rows);
  }
  first_ = static_cast<int32_t>(first_token);
  rows_.resize(n_rows);
  for (size_t i = 0; i < n_rows; ++i) {
    prepare(rows_[i], specs[i], logits.subspan(i * static_cast<size_t>(n_local), static_cast<size_t>(n_local)),
            n_vocab);
  }
  params_.clear();
  for (const SampleSpec& s : specs) params_.push_back(s.params);

  exchange_candidates(comm, requests);
  find_nuclei(comm);
  sum_in_order(comm);
  find_draws(comm);

  out.clear();
  if (comm.rank() != 0) return;
  for (Row& row : rows_) {
    SampledToken result{row.pick.token, 0.0f, {}};
    if (row.logprobs) {
      // As Sampler::sample_with_logprobs: the log-softmax of the penalised row before any truncation.
      const float max_logit = row.best.logit;
      const double total = row.lp_sums.back();
      const bool degenerate = !std::isfinite(max_logit) || !(total > 0.0);
      const double log_norm = static_cast<double>(max_logit) + std::log(total);
      auto logprob = [&](float logit) {
        return degenerate ? kNegInf : static_cast<float>(static_cast<double>(logit) - log_norm);
      };
      result.logprob = logprob(row.pick.logit);
      for (const Candidate& c : row.top_n) result.top.push_back({c.token, logprob(c.logit)});
    }
    out.push_back(std::move(result));
  }
}

void ShardedSampler::prepare(Row& row, const SampleSpec& spec, std::span<const float> logits, int64_t n_vocab) {
  const SamplerParams& p = spec.params;
  if (p.greedy()) {
    row.kind = Kind::Greedy;
  } else if (p.top_k > 0 && p.top_k < n_vocab) {
    row.kind = Kind::TopK;
  } else {
    row.kind = Kind::Walk;
  }
  row.nucleus = row.kind == Kind::Walk && p.top_p < 1.0f;
  row.logprobs = spec.top_logprobs >= 0;
  row.n_top = row.logprobs ? static_cast<size_t>(std::min<int64_t>(spec.top_logprobs, n_vocab)) : 0;
  row.logits.resize(logits.size());
  std::transform(logits.begin(), logits.end(), row.logits.begin(), sanitize_logit);
  if (!spec.mask.empty()) {
    // The grammar's mask before any other step, as Sampler::sample applies it.
    if (spec.mask.size() * 64 < static_cast<size_t>(n_vocab))
      fail("sampling across ranks: a mask shorter than the vocabulary");
    for (size_t i = 0; i < row.logits.size(); ++i) {
      const size_t t = static_cast<size_t>(first_) + i;
      if (!((spec.mask[t / 64] >> (t % 64)) & 1)) row.logits[i] = kNegInf;
    }
  }
  if (p.penalised()) {
    if (spec.penalty_tokens.size() != spec.penalty_counts.size()) fail("sampling across ranks: malformed penalties");
    const int64_t end = first_ + static_cast<int64_t>(logits.size());
    for (size_t i = 0; i < spec.penalty_tokens.size(); ++i) {
      const int32_t token = spec.penalty_tokens[i];
      if (token < first_ || token >= end) continue;
      float& logit = row.logits[static_cast<size_t>(token - first_)];
      logit = penalise_logit(logit, spec.penalty_counts[i], p);
    }
  }
  // The first index of the largest value, as Sampler's greedy pick.
  row.best = {row.logits[0], first_};
  for (size_t i = 1; i < row.logits.size(); ++i) {
    if (row.logits[i] > row.best.logit) row.best = {row.logits[i], first_ + static_cast<int32_t>(i)};
  }
  row.u = 0.0;
  row.owner = -1;
  row.pick = {kNegInf, -1};
  row.kept.clear();
  row.weights.clear();
  row.top_k.clear();
  row.top_n.clear();
}

// Step 1: every rank's best token, rank 0's uniform numbers, and the candidates top-k and logprobs need.
void ShardedSampler::exchange_candidates(collective::Communicator& comm, std::span<const SampleRequest> requests) {
  const bool root = comm.rank() == 0;
  mine_.clear();
  Out out(mine_);
  auto put_best = [&](const Row& row, size_t m) {
    best_of(row.logits, first_, m, local_);
    for (const Candidate& c : local_) out.put(c);
    for (size_t k = local_.size(); k < m; ++k) out.put(Candidate{kNegInf, -1});
  };
  for (size_t i = 0; i < rows_.size(); ++i) {
    Row& row = rows_[i];
    out.put(row.best);
    // The one number a non-greedy pick draws, taken here for the rows drawn over the whole vocabulary (top-k rows
    // draw in Sampler::pick_from_top_k).
    if (root && row.kind == Kind::Walk) row.u = requests[i].sampler->next_uniform();
    out.put(row.u);
    if (row.kind == Kind::TopK) put_best(row, static_cast<size_t>(params_[i].top_k));
    if (row.logprobs) put_best(row, row.n_top);
  }
  comm.all_gather(mine_, all_);

  for (Row& row : rows_) row.best = {kNegInf, -1};
  auto get_best = [&](In& in, size_t m, std::vector<Candidate>& pool) {
    for (size_t k = 0; k < m; ++k) {
      const auto c = in.get<Candidate>();
      if (root && c.token >= 0) pool.push_back(c);
    }
  };
  const size_t size = mine_.size();
  for (int r = 0; r < comm.size(); ++r) {
    In in(std::span<const uint8_t>(all_).subspan(static_cast<size_t>(r) * size, size));
    for (size_t i = 0; i < rows_.size(); ++i) {
      Row& row = rows_[i];
      const auto best = in.get<Candidate>();
      // The ranks hold the vocabulary in rank order: the first rank with the largest value has its first index.
      if (row.best.token < 0 || best.logit > row.best.logit) row.best = best;
      const auto u = in.get<double>();
      if (r == 0) row.u = u;
      if (row.kind == Kind::TopK) get_best(in, static_cast<size_t>(params_[i].top_k), row.top_k);
      if (row.logprobs) get_best(in, row.n_top, row.top_n);
    }
  }
  if (!root) return;
  for (size_t i = 0; i < rows_.size(); ++i) {
    Row& row = rows_[i];
    if (row.kind == Kind::Greedy) row.pick = row.best;
    if (row.kind == Kind::TopK) {
      merge_best(row.top_k, static_cast<size_t>(params_[i].top_k));
      top_logits_.clear();
      top_tokens_.clear();
      for (const Candidate& c : row.top_k) {
        top_logits_.push_back(c.logit);
        top_tokens_.push_back(c.token);
      }
      const int32_t token = requests[i].sampler->pick_from_top_k(top_logits_, top_tokens_);
      row.pick = row.top_k[static_cast<size_t>(std::find(top_tokens_.begin(), top_tokens_.end(), token) -
                                               top_tokens_.begin())];
    }
    if (row.logprobs) merge_best(row.top_n, row.n_top);
  }
}

// Step 2: the exact top-p cut of the rows that draw from a nucleus of the whole vocabulary.
void ShardedSampler::find_nuclei(collective::Communicator& comm) {
  for (size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].nucleus) rows_[i].cut.begin(rows_[i].logits, first_, rows_[i].best.logit, params_[i].top_p);
  }
  std::vector<size_t> sizes(rows_.size(), 0);
  for (;;) {
    mine_.clear();
    for (size_t i = 0; i < rows_.size(); ++i) {
      sizes[i] = 0;
      if (!rows_[i].nucleus || rows_[i].cut.done()) continue;
      const auto message = rows_[i].cut.message();
      sizes[i] = message.size();
      mine_.insert(mine_.end(), message.begin(), message.end());
    }
    if (mine_.empty()) return;
    comm.all_gather(mine_, all_);
    size_t offset = 0;
    for (size_t i = 0; i < rows_.size(); ++i) {
      if (sizes[i] == 0) continue;
      part_.clear();
      for (int r = 0; r < comm.size(); ++r) {
        const auto from = all_.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(r) * mine_.size() + offset);
        part_.insert(part_.end(), from, from + static_cast<ptrdiff_t>(sizes[i]));
      }
      rows_[i].cut.read(part_, comm.size());
      offset += sizes[i];
    }
  }
}

// Step 3: the kept tokens' weights as Sampler::draw computes them, and the sums one node adds in vocabulary order:
// rank r adds its range to rank r - 1's running sum and broadcasts it, so every rank gets one node's bits.
void ShardedSampler::sum_in_order(collective::Communicator& comm) {
  bool any = false;
  for (size_t i = 0; i < rows_.size(); ++i) {
    Row& row = rows_[i];
    const SamplerParams& p = params_[i];
    const float max_logit = row.best.logit;  // the best token is always kept, so this is the kept tokens' max
    if (row.kind == Kind::Walk) {
      any = true;
      const float threshold = p.min_p > 0.0f ? max_logit + std::log(p.min_p) : kNegInf;
      const float inv_temp = 1.0f / p.temperature;
      for (size_t t = 0; t < row.logits.size(); ++t) {
        const float logit = row.logits[t];
        if (logit < threshold) continue;
        if (row.nucleus && !row.cut.kept(logit, first_ + static_cast<int32_t>(t))) continue;
        row.kept.push_back(static_cast<int32_t>(t));
        row.weights.push_back(std::exp((logit - max_logit) * inv_temp));
      }
    }
    if (row.logprobs) {
      any = true;
      row.lp_weights.resize(row.logits.size());
      for (size_t t = 0; t < row.logits.size(); ++t) row.lp_weights[t] = std::exp(row.logits[t] - max_logit);
    }
    row.sums.assign(static_cast<size_t>(comm.size()), 0.0);
    row.lp_sums.assign(static_cast<size_t>(comm.size()), 0.0);
  }
  if (!any) return;
  for (int r = 0; r < comm.size(); ++r) {
    const auto at = static_cast<size_t>(r);
    mine_.clear();
    if (comm.rank() == r) {
      Out out(mine_);
      for (Row& row : rows_) {
        auto add = [&](const std::vector<float>& weights, const std::vector<double>& sums) {
          double sum = r == 0 ? 0.0 : sums[at - 1];
          for (float w : weights) sum += static_cast<double>(w);
          out.put(sum);
        };
        if (row.kind == Kind::Walk) add(row.weights, row.sums);
        if (row.logprobs) add(row.lp_weights, row.lp_sums);
      }
    }
    comm.broadcast(mine_, r);
    In in(mine_);
    for (Row& row : rows_) {
      if (row.kind == Kind::Walk) row.sums[at] = in.get<double>();
      if (row.logprobs) row.lp_sums[at] = in.get<double>();
    }
  }
}

// Step 4: the rank whose range holds the draw finds the token, walking from the sum before its range.
void ShardedSampler::find_draws(collective::Communicator& comm) {
  bool elsewhere = false;
  for (Row& row : rows_) {
    if (row.kind != Kind::Walk) continue;
    const double target = row.u * row.sums.back();
    // The running sum never falls, so the first rank whose sum passes the target holds the first token that does.
    // None does only by rounding or a row without weight (NaN); Sampler then takes the best token.
    const auto passed = std::find_if(row.sums.begin(), row.sums.end(), [&](double s) { return s > target; });
    row.owner = passed == row.sums.end() ? -1 : static_cast<int>(passed - row.sums.begin());
    if (row.owner < 0) row.pick = row.best;
    if (row.owner > 0) elsewhere = true;
    if (row.owner != comm.rank()) continue;
    double cumulative = row.owner == 0 ? 0.0 : row.sums[static_cast<size_t>(row.owner) - 1];
    for (size_t j = 0; j < row.kept.size(); ++j) {
      cumulative += static_cast<double>(row.weights[j]);
      if (cumulative > target) {
        const auto t = static_cast<size_t>(row.kept[j]);
        row.pick = {row.logits[t], first_ + static_cast<int32_t>(t)};
        break;
      }
    }
    if (row.pick.token < 0 && row.owner >= 0) fail("sampling across ranks: the draw is not in this rank's range");
  }
  if (!elsewhere) return;
  mine_.clear();
  Out out(mine_);
  for (const Row& row : rows_) {
    if (row.kind == Kind::Walk) out.put(row.owner == comm.rank() ? row.pick : Candidate{kNegInf, -1});
  }
  comm.all_gather(mine_, all_);
  const size_t size = mine_.size();
  size_t k = 0;
  for (Row& row : rows_) {
    if (row.kind != Kind::Walk) continue;
    if (row.owner > 0) {
      In in(std::span<const uint8_t>(all_).subspan(static_cast<size_t>(row.owner) * size + k * sizeof(Candidate),
                                                   sizeof(Candidate)));
      row.pick = in.get<Candidate>();
    }
    ++k;
  }
}

}  // namespace tessera
