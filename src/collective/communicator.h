// The collectives that tensor and expert parallelism need between the ranks that share each layer: an in-place sum
// over ranks after the sharded matmuls, a broadcast of the head's requests, a gather of the output head's shards,
// and the small exchanges of sampling from the head's shards (engine/sharded_sampling.h).
// Backends: MPI (mpi_communicator.h) between processes, a thread group (thread_group.h) inside one.
#pragma once

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
  const CollectiveStats& stats() const { return stats_; }

 protected:
  CollectiveStats stats_;
};

}  // namespace tessera::collective
