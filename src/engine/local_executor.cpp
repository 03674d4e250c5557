// LocalExecutor: forwards batches to its single Stage; under tensor/expert parallelism rank 0 broadcasts each
// operation (a batch, a cleared or truncated sequence, the end) before running it; pipeline ranks pass each
// micro-batch's activations to the next stage's ranks.
#include "engine/local_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>

#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

enum class Op : uint8_t {
  Decode = 1,
  Clear = 2,
  Truncate = 3,
  Stop = 4,
  DecodeSampled = 5,
  StageForward = 6,
  TimeBatches = 7
};

class Writer {
 public:
  explicit Writer(Op op) { bytes_.push_back(static_cast<uint8_t>(op)); }
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  template <class T>
  void put(const std::vector<T>& v) {
    put(static_cast<uint64_t>(v.size()));
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    bytes_.insert(bytes_.end(), p, p + v.size() * sizeof(T));
  }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& b) : b_(b) {}
  template <class T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  template <class T>
  std::vector<T> get_vector() {
    const auto n = get<uint64_t>();
    if (n > b_.size()) fail("a malformed operation from rank 0");
    need(n * sizeof(T));
    std::vector<T> v(n);
    std::memcpy(v.data(), b_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return v;
  }

 private:
  void need(size_t n) const {
    if (at_ + n > b_.size()) fail("a malformed operation from rank 0");
  }
  const std::vector<uint8_t>& b_;
  size_t at_ = 0;
};

void put_batch(Writer& w, const Batch& b) {
  w.put(b.tokens);
  w.put(b.seq);
  w.put(b.pos);
  w.put(b.want_logits);
}

Batch get_batch(Reader& r) {
  Batch b;
  b.tokens = r.get_vector<int32_t>();
  b.seq = r.get_vector<int32_t>();
  b.pos = r.get_vector<int32_t>();
  b.want_logits = r.get_vector<uint8_t>();
  return b;
}

// Tokens [first, first + n) of the batch.
void part_of(const Batch& b, int64_t first, int64_t n, Batch& out) {
  const auto cut = [&](const auto& v, auto& to) { to.assign(v.begin() + first, v.begin() + first + n); };
  cut(b.tokens, out.tokens);
  cut(b.seq, out.seq);
  cut(b.pos, out.pos);
  cut(b.want_logits, out.want_logits);
}

// Micro-batches of a pipeline's batch: a decode step stays whole; a prompt is cut into up to two per stage, at
// least 64 tokens each, so that the stages overlap without making the matmuls small.
int64_t micro_batch_tokens(int64_t n_tokens, int n_stages) {
  const int64_t parts = std::clamp<int64_t>(n_tokens / 64, 1, 2 * static_cast<int64_t>(n_stages));
  return (n_tokens + parts - 1) / parts;
}

}  // namespace

LocalExecutor::LocalExecutor(std::shared_ptr<const ModelWeights> weights, const StageOptions& options, int n_threads,
                             bool pin, std::shared_ptr<collective::Communicator> comm, PipelineRanks pipe)
    : comm_(std::move(comm)),
      pipe_(std::move(pipe)),
      pool_(n_threads, pin),
      stage_(std::move(weights), options, pool_, comm_.get()) {}

LocalExecutor::~LocalExecutor() {
  // A broken group told its members why when it broke: they stopped already.
  if (op_comm() == nullptr || op_comm()->rank() != 0 || op_comm()->failed()) return;
  try {
    send(Writer(Op::Stop).take());
  } catch (const std::exception& e) {
    // While the error that broke the group unwinds (a member lost, say), its catcher reports it: saying it again
    // here ("the group failed earlier: ...") was the second line of every such failure.
    if (std::uncaught_exceptions() == 0) log_warn("the other ranks were not told to stop: {}", e.what());
  }
}

void LocalExecutor::send(std::vector<uint8_t> op) {
  if (op_comm() == nullptr) return;
  op_comm()->broadcast(op, 0);
}

void LocalExecutor::forward(const Batch& batch, bool gather, StageOutput& out) {
  const auto run = [&](const Batch& b, const float* in, StageOutput& o) {
    if (gather) {
      stage_.forward(b, in, o);
    } else {
      stage_.forward_ungathered(b, in, o);
    }
  };
  if (!pipe_.enabled()) return run(batch, nullptr, out);
  out.logits.clear();
  const int64_t step = micro_batch_tokens(batch.size(), pipe_.n_stages);
  for (int64_t first = 0; first < batch.size(); first += step) {
    const int64_t n = std::min(step, batch.size() - first);
    part_of(batch, first, n, micro_);
    const float* in = nullptr;
    if (pipe_.prev >= 0) {
      const auto start = std::chrono::steady_clock::now();
      pipe_.world->recv(wire_, pipe_.prev);
      wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const auto want = static_cast<size_t>(n * stage_.in_width()) * sizeof(float);
      if (wire_.size() != want) {
        fail("the stage before sent {} bytes of activations for {} tokens, expected {}", wire_.size(), n, want);
      }
      in = reinterpret_cast<const float*>(wire_.data());
    }
    run(micro_, in, part_);
    if (pipe_.next >= 0) {
      pipe_.world->send({reinterpret_cast<const uint8_t*>(part_.hidden.data()), part_.hidden.size() * sizeof(float)},
                        pipe_.next);
    } else {
      out.logits.insert(out.logits.end(), part_.logits.begin(), part_.logits.end());
    }
  }
}

void LocalExecutor::decode(const Batch& batch, std::vector<float>& logits) {
  if (op_comm() != nullptr) {
    Writer w(Op::Decode);
    put_batch(w, batch);
    send(w.take());
  }
  forward(batch, true, out_);
  logits.swap(out_.logits);
}

void LocalExecutor::decode_sampled(const Batch& batch, std::span<const SampleRequest> requests,
                                   std::vector<SampledToken>& out) {
  const bool apart =
      comm_ != nullptr && stage_.shard().sharded() && requests.size() == static_cast<size_t>(batch.n_outputs());
  if (!apart) {
    Executor::decode_sampled(batch, requests, out);
    return;
  }
  const std::vector<SampleSpec> specs = sample_specs(requests);
  Writer w(Op::DecodeSampled);
  put_batch(w, batch);
  w.put(encode_specs(specs));
  send(w.take());
  sample_apart(batch, specs, requests, out);
}

void LocalExecutor::sample_apart(const Batch& batch, std::span<const SampleSpec> specs,
                                 std::span<const SampleRequest> requests, std::vector<SampledToken>& out) {
  forward(batch, false, out_);
  if (pipe_.next >= 0) return;  // the last stage samples
  const auto [v0, nv] = stage_.vocab_range();
  sharded_.sample(*comm_, specs, out_.logits, v0, nv, stage_.config().n_vocab, requests, out);
}

void LocalExecutor::forward_stage(const Batch& batch, const float* hidden_in, StageOutput& out) {
  if (comm_ != nullptr) {
    Writer w(Op::StageForward);
    put_batch(w, batch);
    std::vector<float> hidden;
    if (hidden_in != nullptr) hidden.assign(hidden_in, hidden_in + batch.size() * stage_.in_width());
    w.put(hidden);
    send(w.take());
  }
  stage_.forward(batch, hidden_in, out);
}

std::vector<BatchTime> LocalExecutor::time_batches(std::span<const int64_t> sizes, int rounds, double budget_s) {
  if (comm_ == nullptr) return stage_.time_batches(sizes, rounds, budget_s);
  Writer w(Op::TimeBatches);
  w.put(std::vector<int64_t>(sizes.begin(), sizes.end()));
  w.put(static_cast<int32_t>(rounds));
  send(w.take());
  return stage_.time_batches(sizes, rounds, 1e30);
}

void LocalExecutor::clear_sequence(int64_t seq) {
  Writer w(Op::Clear);
  w.put(seq);
  send(w.take());
  stage_.clear_sequence(seq);
}

void LocalExecutor::truncate_sequence(int64_t seq, int64_t n) {
  Writer w(Op::Truncate);
  w.put(seq);
  w.put(n);
  send(w.take());
  stage_.truncate_sequence(seq, n);
}

void LocalExecutor::follow() {
  if (op_comm() == nullptr || op_comm()->rank() == 0) fail("follow() is for the ranks other than 0");
  std::vector<uint8_t> op;
  for (;;) {
    op_comm()->broadcast(op, 0);
    if (op.empty()) fail("an empty operation from rank 0");
    Reader r(op);
    const auto kind = static_cast<Op>(r.get<uint8_t>());
    try {
      switch (kind) {
        case Op::Decode:
          forward(get_batch(r), true, out_);
          break;
        case Op::DecodeSampled: {
          const Batch batch = get_batch(r);
          const std::vector<SampleSpec> specs = decode_specs(r.get_vector<uint8_t>());
          std::vector<SampledToken> none;
          sample_apart(batch, specs, {}, none);
          break;
        }
        case Op::StageForward: {
          const Batch batch = get_batch(r);
          const std::vector<float> hidden = r.get_vector<float>();
          if (!hidden.empty() && hidden.size() != static_cast<size_t>(batch.size() * stage_.in_width())) {
            fail("a stage's operation with {} activations for {} tokens", hidden.size(), batch.size());
          }
          stage_.forward(batch, hidden.empty() ? nullptr : hidden.data(), out_);
          break;
        }
        case Op::TimeBatches: {
          const std::vector<int64_t> sizes = r.get_vector<int64_t>();
          stage_.time_batches(sizes, r.get<int32_t>(), 1e30);
          break;
        }
        case Op::Clear:
          stage_.clear_sequence(r.get<int64_t>());
          break;
        case Op::Truncate: {
          const auto seq = r.get<int64_t>();
          stage_.truncate_sequence(seq, r.get<int64_t>());
          break;
        }
        case Op::Stop:
          return;
        default:
          fail("an unknown operation {} from rank 0", static_cast<int>(kind));
      }
    } catch (const Error&) {
      // Rank 0 runs the same operation on the same state and reports the same error.
    }
  }
}

}  // namespace tessera
