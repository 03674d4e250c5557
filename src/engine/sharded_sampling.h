// Sampling from logits split by vocabulary over the ranks of a tensor-parallel group without gathering rows: each
// rank works on its own range and the ranks exchange a few numbers a row, and every pick, draw and logprob equals
// what one node's Sampler gives for the same seed, parameters and history (docs/parallel.md, "Sampling").
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "collective/communicator.h"
#include "engine/executor.h"
#include "engine/nucleus.h"
#include "engine/sampler.h"

namespace tessera {

// What every rank needs to know about one output's sampling. Rank 0 builds it from the request's Sampler and sends
// it with the batch; the seed and the random stream stay with rank 0.
struct SampleSpec {
  SamplerParams params;
  int32_t top_logprobs = -1;            // as SampleRequest's
  std::vector<int32_t> penalty_tokens;  // the tokens the penalties touch, and how often each is in the window
  std::vector<int32_t> penalty_counts;
  // The grammar's token mask (bit t: token t allowed; Sampler::grammar()), computed once on rank 0 so every rank
  // masks its own range with it; empty without a grammar.
  std::vector<uint64_t> mask;
};

std::vector<SampleSpec> sample_specs(std::span<const SampleRequest> requests);
std::vector<uint8_t> encode_specs(std::span<const SampleSpec> specs);
// Throws Error for bytes encode_specs did not write, or parameters Sampler would refuse.
std::vector<SampleSpec> decode_specs(std::span<const uint8_t> bytes);

// One step's picks over the group; buffers are kept between steps. Per step, for all rows at once (sizes per row):
//   1. all-gather: each rank's best token (8 bytes), rank 0's uniform draw (8), and its top_k best for top-k rows
//      and its top_logprobs best for logprobs rows (8 a token). Greedy and top-k rows are settled here, on rank 0
//      with the row's Sampler, from the merged candidates.
//   2. top-p without top-k only: NucleusCut's rounds (all-gathers of at most 5 KiB a row; usually 2 to 4).
//   3. rows drawn over the whole vocabulary (top-k off) and logprobs rows: one broadcast per rank in rank order,
//      each carrying the running sums (8 bytes a row) so that they are added in one node's order, bit for bit.
//      Every rank then knows which rank's range holds the draw.
//   4. when a rank other than 0 holds a draw: an all-gather of the picked tokens (8 bytes a row).
class ShardedSampler {
 public:
  // Every rank of the group calls this with the same specs and its own rows of logits (specs.size() rows of
  // n_local, for tokens [first_token, first_token + n_local); the ranks' ranges in rank order cover the
  // vocabulary). Rank 0 passes one request per spec and gets the picks in out, its samplers moved on as sample()
  // would; the other ranks pass no requests and get nothing.
  void sample(collective::Communicator& comm, std::span<const SampleSpec> specs, std::span<const float> logits,
              int64_t first_token, int64_t n_local, int64_t n_vocab, std::span<const SampleRequest> requests,
              std::vector<SampledToken>& out);

  struct Candidate {
    float logit;
    int32_t token;
  };

 private:
  enum class Kind : uint8_t { Greedy, TopK, Walk };
  struct Row {
    Kind kind = Kind::Greedy;
    bool nucleus = false;  // top-p without top-k
    bool logprobs = false;
    size_t n_top = 0;
    std::vector<float> logits;  // this rank's, sanitized and penalised
    Candidate best{};           // this rank's best, then the group's
    double u = 0.0;             // rank 0's draw
    NucleusCut cut;
    std::vector<int32_t> kept;  // walk: this rank's kept tokens (local index) in vocabulary order
    std::vector<float> weights;
    std::vector<float> lp_weights;  // logprobs: exp(logit - max) of every token here
    std::vector<double> sums;       // walk: the running sum of the weights at the end of each rank's range
    std::vector<double> lp_sums;
    int owner = -1;  // walk: the rank whose range holds the draw; -1: none (the best token, as Sampler falls back)
    Candidate pick{};
    std::vector<Candidate> top_k;  // rank 0: merged
    std::vector<Candidate> top_n;
  };

  void prepare(Row& row, const SampleSpec& spec, std::span<const float> logits, int64_t n_vocab);
  void exchange_candidates(collective::Communicator& comm, std::span<const SampleRequest> requests);
  void find_nuclei(collective::Communicator& comm);
  void sum_in_order(collective::Communicator& comm);
  void find_draws(collective::Communicator& comm);

  std::vector<Row> rows_;
  std::vector<SamplerParams> params_;
  int32_t first_ = 0;
  std::vector<Candidate> local_;
  std::vector<uint8_t> mine_;
  std::vector<uint8_t> all_;
  std::vector<uint8_t> part_;
  std::vector<float> top_logits_;
  std::vector<int32_t> top_tokens_;
};

}  // namespace tessera
