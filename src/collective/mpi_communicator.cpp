// Non-blocking collectives polled against a deadline (MPI_Test), so a rank that died or hangs ends the job with a
// message instead of leaving the others waiting for ever.
#include "collective/mpi_communicator.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "util/error.h"

namespace tessera::collective {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Waits for the request; a missed deadline ends the job (no rank can go on without the others).
void wait(MPI_Request& request, std::chrono::milliseconds timeout, int rank, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int spins = 0;; ++spins) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr,
                   "error: rank %d: %s did not complete within %.0f s: another rank died or hangs; ending the job\n",
                   rank, what, static_cast<double>(timeout.count()) / 1000.0);
      std::fflush(stderr);
      MpiSession::abort_all(1);
    }
    // Spin first (a decode step's all-reduce takes microseconds), then yield the core to the other ranks.
    if (spins > 2000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

bool MpiSession::launched() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

MpiSession::MpiSession() {
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    fail("MPI could not start (MPI_Init_thread)");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  host_.assign(name, static_cast<size_t>(len));
}

MpiSession::~MpiSession() { MPI_Finalize(); }

void MpiSession::abort_all(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

MpiCommunicator::MpiCommunicator(std::shared_ptr<const MpiSession> session, std::chrono::milliseconds timeout)
    : session_(std::move(session)), rank_(session_->rank()), size_(session_->size()), timeout_(timeout) {}

void MpiCommunicator::all_reduce_sum(std::span<float> data) {
  const auto start = std::chrono::steady_clock::now();
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                 &request);
  wait(request, timeout_, rank_, "an all-reduce");
  count(data.size() * sizeof(float), seconds_since(start));
}

// Requests wait without a deadline: the ranks idle here between a server's requests for as long as there are none.
// Only the root's time counts: the others' is the wait for the next request, not a cost of the step.
void MpiCommunicator::broadcast(std::vector<uint8_t>& bytes, int root) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t n = bytes.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD);
  bytes.resize(n);
  MPI_Request request;
  MPI_Ibcast(bytes.data(), static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD, &request);
  wait(request, timeout_, rank_, "a broadcast");
  count(rank_ == root ? n : 0, rank_ == root ? seconds_since(start) : 0.0);
}

void MpiCommunicator::gather(std::span<const float> mine, std::vector<float>& all, int root) {
  const auto start = std::chrono::steady_clock::now();
  int n_mine = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  MPI_Request request;
  MPI_Igather(&n_mine, 1, MPI_INT, counts.data(), 1, MPI_INT, root, MPI_COMM_WORLD, &request);
  wait(request, timeout_, rank_, "a gather");
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    displs[static_cast<size_t>(r)] = total;
    total += counts[static_cast<size_t>(r)];
  }
  all.assign(rank_ == root ? static_cast<size_t>(total) : 0, 0.0f);
  MPI_Igatherv(mine.data(), n_mine, MPI_FLOAT, all.data(), counts.data(), displs.data(), MPI_FLOAT, root,
               MPI_COMM_WORLD, &request);
  wait(request, timeout_, rank_, "a gather");
  count(mine.size() * sizeof(float), seconds_since(start));
}

void MpiCommunicator::all_gather(std::span<const uint8_t> mine, std::vector<uint8_t>& all) {
  const auto start = std::chrono::steady_clock::now();
  const int n_mine = static_cast<int>(mine.size());
  all.assign(mine.size() * static_cast<size_t>(size_), 0);
  MPI_Request request;
  MPI_Iallgather(mine.data(), n_mine, MPI_BYTE, all.data(), n_mine, MPI_BYTE, MPI_COMM_WORLD, &request);
  wait(request, timeout_, rank_, "an all-gather");
  count(mine.size(), seconds_since(start));
}

}  // namespace tessera::collective
