// LocalExecutor: forwards batches to its single Stage; under tensor/expert parallelism rank 0 broadcasts each
// operation (a batch, a cleared or truncated sequence, the end) before running it.
#include "engine/local_executor.h"

#include <cstring>

#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

enum class Op : uint8_t { Decode = 1, Clear = 2, Truncate = 3, Stop = 4, DecodeSampled = 5 };

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

}  // namespace

LocalExecutor::LocalExecutor(std::shared_ptr<const ModelWeights> weights, const StageOptions& options, int n_threads,
                             bool pin, std::shared_ptr<collective::Communicator> comm)
    : comm_(std::move(comm)), pool_(n_threads, pin), stage_(std::move(weights), options, pool_, comm_.get()) {}

LocalExecutor::~LocalExecutor() {
  if (comm_ == nullptr || comm_->rank() != 0) return;
  try {
    send(Writer(Op::Stop).take());
  } catch (const std::exception& e) {
    log_warn("the other ranks were not told to stop: {}", e.what());
  }
}

void LocalExecutor::send(std::vector<uint8_t> op) {
  if (comm_ == nullptr) return;
  comm_->broadcast(op, 0);
}

void LocalExecutor::decode(const Batch& batch, std::vector<float>& logits) {
  if (comm_ != nullptr) {
    Writer w(Op::Decode);
    put_batch(w, batch);
    send(w.take());
  }
  stage_.forward(batch, nullptr, out_);
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
  stage_.forward_ungathered(batch, nullptr, out_);
  const auto [v0, nv] = stage_.vocab_range();
  sharded_.sample(*comm_, specs, out_.logits, v0, nv, stage_.config().n_vocab, requests, out);
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
  if (comm_ == nullptr || comm_->rank() == 0) fail("follow() is for the ranks other than 0");
  std::vector<uint8_t> op;
  for (;;) {
    comm_->broadcast(op, 0);
    if (op.empty()) fail("an empty operation from rank 0");
    Reader r(op);
    const auto kind = static_cast<Op>(r.get<uint8_t>());
    try {
      switch (kind) {
        case Op::Decode:
          stage_.forward(get_batch(r), nullptr, out_);
          break;
        case Op::DecodeSampled: {
          const Batch batch = get_batch(r);
          const std::vector<SampleSpec> specs = decode_specs(r.get_vector<uint8_t>());
          std::vector<SampledToken> none;
          sample_apart(batch, specs, {}, none);
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
