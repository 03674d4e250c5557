// MPI as the collectives' backend (OpenMPI from Debian; UCX carries RDMA where the fabric has it): the ranks that
// `mpirun -np N tessera ...` or Slurm's srun started. MPI waits forever for a rank that hangs; every collective here
// has a deadline instead, and a missed one ends the whole job with a message naming the stage of the run.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "collective/launcher.h"

namespace tessera::collective {

// MPI for the life of the object (MPI_Init_thread, MPI_Finalize); at most one per process.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // Which launcher (mpirun, srun) started this process, from its environment, before MPI starts.
  static Launch launch();
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
  // lives. Every rank constructs it at the same time (a collective).
  MpiCommunicator(std::shared_ptr<const MpiSession> session, std::chrono::milliseconds timeout);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  // The ranks of this communicator that pass the same color, ranked in this one's order (MPI_Comm_split): a
  // collective of all of them. The group shares the deadline and the liveness pings.
  std::unique_ptr<MpiCommunicator> split(int color) const;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(std::span<float> data) override;
  void broadcast(std::vector<uint8_t>& bytes, int root) override;
  void gather(std::span<const float> mine, std::vector<float>& all, int root) override;
  void all_gather(std::span<const uint8_t> mine, std::vector<uint8_t>& all) override;
  void send(std::span<const uint8_t> bytes, int to) override;
  void recv(std::vector<uint8_t>& bytes, int from) override;

 private:
  struct Liveness;  // the world's liveness pings (mpi.h types stay in the .cpp)
  struct Comm;      // this communicator's MPI_Comm
  MpiCommunicator(const MpiCommunicator& parent, int color);
  // Polls an MPI_Request* until it completes, answering pings; with `deadline`, a wait past the timeout names the
  // ranks that do not answer and ends the job.
  void wait(void* request, bool deadline, const char* what);

  static constexpr int kDataTag = 3;
  std::shared_ptr<const MpiSession> session_;
  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<Liveness> liveness_;
  std::unique_ptr<Comm> comm_;
};

}  // namespace tessera::collective
