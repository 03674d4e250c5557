// MPI as the collectives' backend (OpenMPI from Debian; UCX carries RDMA where the fabric has it): the ranks that
// `mpirun -np N tessera ...` or Slurm's srun started. MPI waits forever for a rank that hangs; every collective here
// has a deadline instead, and a missed one ends the whole job with a message naming the stage of the run.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "collective/communicator.h"

namespace tessera::collective {

// MPI for the life of the object (MPI_Init_thread, MPI_Finalize); at most one per process.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // Whether a launcher (mpirun, srun) started this process as one of several ranks.
  static bool launched();
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& host() const { return host_; }

  // Ends every rank of the job (after a rank's error, so that none waits for it).
  [[noreturn]] static void abort_all(int code);

 private:
  int rank_ = 0;
  int size_ = 1;
  std::string host_;
};

class MpiCommunicator : public Communicator {
 public:
  // timeout: how long a collective may wait for the slowest rank before the job is ended. Keeps MPI up while it
  // lives.
  MpiCommunicator(std::shared_ptr<const MpiSession> session, std::chrono::milliseconds timeout);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(std::span<float> data) override;
  void broadcast(std::vector<uint8_t>& bytes, int root) override;
  void gather(std::span<const float> mine, std::vector<float>& all, int root) override;
  void all_gather(std::span<const uint8_t> mine, std::vector<uint8_t>& all) override;

 private:
  std::shared_ptr<const MpiSession> session_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
};

}  // namespace tessera::collective
