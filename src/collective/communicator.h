// The collectives that tensor and expert parallelism need between the ranks that share each layer: an in-place sum
// over ranks after the sharded matmuls, a broadcast of the head's requests, a gather of the output head's shards,
// and the small exchanges of sampling from the head's shards (engine/sharded_sampling.h); and the point-to-point
// messages that carry a pipeline stage's activations to the next stage's ranks (--tp with --pp).
// Backends: MPI (mpi_communicator.h) between processes, a thread group (thread_group.h) inside one.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

namespace tessera::collective {

// What one rank spent in collectives (bench and /metrics report it per token).
struct CollectiveStats {
  uint64_t calls = 0;
  uint64_t bytes = 0;  // payload this rank sent into collectives
  double seconds = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // data[i] = the sum of every rank's data[i], on every rank, the same bits everywhere.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  // The root's bytes on every rank (their size included).
  virtual void broadcast(std::vector<uint8_t>& bytes, int root) = 0;
  // Each rank's floats concatenated in rank order, on the root (others get nothing).
  virtual void gather(std::span<const float> mine, std::vector<float>& all, int root) = 0;
  // Each rank's bytes concatenated in rank order, on every rank; every rank passes the same number of bytes.
  virtual void all_gather(std::span<const uint8_t> mine, std::vector<uint8_t>& all) = 0;
  // One message to rank `to`, and the next message from rank `from` (bytes resized to it), in the order sent.
  virtual void send(std::span<const uint8_t> bytes, int to) = 0;
  virtual void recv(std::vector<uint8_t>& bytes, int from) = 0;
  // A group whose links broke (a member lost): every later call throws, and the members were told already.
  virtual bool failed() const { return false; }
  // A snapshot: the executor's thread adds to the counters while /metrics reads them from another.
  CollectiveStats stats() const {
    return {calls_.load(std::memory_order_relaxed), bytes_.load(std::memory_order_relaxed),
            static_cast<double>(nanos_.load(std::memory_order_relaxed)) * 1e-9};
  }
  // Puts back earlier stats (a measurement at start is not the run's traffic).
  void restore_stats(const CollectiveStats& s) {
    calls_.store(s.calls, std::memory_order_relaxed);
    bytes_.store(s.bytes, std::memory_order_relaxed);
    nanos_.store(static_cast<uint64_t>(s.seconds * 1e9), std::memory_order_relaxed);
  }

 protected:
  // One collective: the payload this rank sent and the time it spent in it.
  void count(uint64_t bytes, double seconds) {
    calls_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    nanos_.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> nanos_{0};
};

}  // namespace tessera::collective
