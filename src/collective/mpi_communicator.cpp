// Non-blocking collectives polled against a deadline (MPI_Test), so a rank that died or hangs ends the job with a
// message instead of leaving the others waiting for ever. While they wait, the ranks answer each other's liveness
// pings on a communicator of their own: at a deadline the waiting rank pings the others and names those that do not
// answer (stopped, or stuck outside MPI), which a collective alone cannot tell.
#include "collective/mpi_communicator.h"

#include <fmt/format.h>
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

}  // namespace

// The pings are the world's, shared by a communicator and the groups split from it: a rank answers them from
// whatever it waits in, and a silent rank is named by its world rank and host.
struct MpiCommunicator::Liveness {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request ping = MPI_REQUEST_NULL;  // the posted receive of the next ping
  int ping_in = 0;
  int rank = 0, size = 1;          // in the world
  std::vector<std::string> hosts;  // by world rank

  explicit Liveness(const MpiSession& session) : rank(session.rank()), size(session.size()) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    constexpr int kName = 64;
    std::vector<char> mine(kName, '\0'), all(static_cast<size_t>(kName) * static_cast<size_t>(size));
    session.host().copy(mine.data(), kName - 1);
    MPI_Allgather(mine.data(), kName, MPI_CHAR, all.data(), kName, MPI_CHAR, comm);
    for (int r = 0; r < size; ++r) hosts.emplace_back(all.data() + static_cast<size_t>(r) * kName);
    post();
  }
  ~Liveness() {
    if (ping != MPI_REQUEST_NULL) {
      MPI_Cancel(&ping);
      MPI_Wait(&ping, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&comm);
  }
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  void post() { MPI_Irecv(&ping_in, 1, MPI_INT, MPI_ANY_SOURCE, kPingTag, comm, &ping); }

  // Answers a pending ping; cheap enough to call while polling.
  void answer() {
    int done = 0;
    MPI_Status status;
    MPI_Test(&ping, &done, &status);
    if (!done) return;
    MPI_Request reply;
    MPI_Isend(&rank, 1, MPI_INT, status.MPI_SOURCE, kPongTag, comm, &reply);
    MPI_Request_free(&reply);
    post();
  }

  // The other ranks that do not answer a ping within `patience`, as "rank R (host)".
  std::string silent(std::chrono::milliseconds patience) {
    std::vector<MPI_Request> pongs;
    std::vector<int> peers, answers(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      MPI_Request send, recv;
      MPI_Isend(&rank, 1, MPI_INT, r, kPingTag, comm, &send);
      MPI_Request_free(&send);
      MPI_Irecv(&answers[static_cast<size_t>(r)], 1, MPI_INT, r, kPongTag, comm, &recv);
      pongs.push_back(recv);
      peers.push_back(r);
    }
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (std::chrono::steady_clock::now() < deadline) {
      answer();
      // One by one: MPI_Testall leaves every request as it was unless all completed, which would name them all.
      bool all = true;
      for (MPI_Request& pong : pongs) {
        int done = 0;
        if (pong != MPI_REQUEST_NULL) MPI_Test(&pong, &done, MPI_STATUS_IGNORE);
        all = all && pong == MPI_REQUEST_NULL;
      }
      if (all) return {};
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::string who;
    for (size_t i = 0; i < pongs.size(); ++i) {
      if (pongs[i] == MPI_REQUEST_NULL) continue;
      who += fmt::format("{}rank {} ({})", who.empty() ? "" : ", ", peers[i], hosts[static_cast<size_t>(peers[i])]);
    }
    return who;
  }

  static constexpr int kPingTag = 1, kPongTag = 2;
};

struct MpiCommunicator::Comm {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;
  ~Comm() {
    if (owned) MPI_Comm_free(&comm);
  }
};

Launch MpiSession::launch() {
#ifdef OPEN_MPI
  constexpr bool needs_pmix = true;  // Debian's Open MPI 4 has no PMI-1/PMI-2 components for srun's --mpi=pmi2
#else
  constexpr bool needs_pmix = false;
#endif
  return detect_launch([](const char* var) { return std::getenv(var); }, needs_pmix);
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
    : session_(std::move(session)),
      rank_(session_->rank()),
      size_(session_->size()),
      timeout_(timeout),
      liveness_(std::make_shared<Liveness>(*session_)),
      comm_(std::make_unique<Comm>()) {
  comm_->comm = MPI_COMM_WORLD;
}

MpiCommunicator::MpiCommunicator(const MpiCommunicator& parent, int color)
    : session_(parent.session_),
      timeout_(parent.timeout_),
      liveness_(parent.liveness_),
      comm_(std::make_unique<Comm>()) {
  MPI_Comm_split(parent.comm_->comm, color, parent.rank_, &comm_->comm);
  comm_->owned = true;
  MPI_Comm_rank(comm_->comm, &rank_);
  MPI_Comm_size(comm_->comm, &size_);
}

MpiCommunicator::~MpiCommunicator() = default;

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color) const {
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(*this, color));
}

void MpiCommunicator::wait(void* request_ptr, bool deadline, const char* what) {
  auto& request = *static_cast<MPI_Request*>(request_ptr);
  const auto until = std::chrono::steady_clock::now() + timeout_;
  for (int spins = 0;; ++spins) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    if (spins % 64 == 0) liveness_->answer();  // now and then: a step's own polling stays one MPI_Test
    if (deadline && std::chrono::steady_clock::now() > until) {
      // A second's patience: the others answer from their own wait loops within a millisecond.
      const std::string silent = liveness_->silent(std::chrono::milliseconds(1000));
      const std::string why = silent.empty()
                                  ? std::string("every rank answers a ping, so they wait in different collectives")
                                  : silent + " did not answer a ping: stopped, or stuck outside MPI";
      std::fprintf(stderr, "error: rank %d: %s did not complete within %.0f s: %s; ending the job\n", liveness_->rank,
                   what, static_cast<double>(timeout_.count()) / 1000.0, why.c_str());
      std::fflush(stderr);
      MpiSession::abort_all(1);
    }
    // Spin first (a decode step's all-reduce takes microseconds), then yield the core to the other ranks.
    if (spins > 2000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void MpiCommunicator::all_reduce_sum(std::span<float> data) {
  const auto start = std::chrono::steady_clock::now();
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, comm_->comm, &request);
  wait(&request, true, "an all-reduce");
  count(data.size() * sizeof(float), seconds_since(start));
}

// Requests wait without a deadline: the ranks idle here between a server's requests for as long as there are none.
// Only the root's time counts: the others' is the wait for the next request, not a cost of the step.
void MpiCommunicator::broadcast(std::vector<uint8_t>& bytes, int root) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t n = bytes.size();
  MPI_Request request;
  MPI_Ibcast(&n, 1, MPI_UINT64_T, root, comm_->comm, &request);
  wait(&request, false, "a broadcast");
  bytes.resize(n);
  MPI_Ibcast(bytes.data(), static_cast<int>(n), MPI_BYTE, root, comm_->comm, &request);
  wait(&request, true, "a broadcast");
  count(rank_ == root ? n : 0, rank_ == root ? seconds_since(start) : 0.0);
}

void MpiCommunicator::gather(std::span<const float> mine, std::vector<float>& all, int root) {
  const auto start = std::chrono::steady_clock::now();
  int n_mine = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  MPI_Request request;
  MPI_Igather(&n_mine, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm_->comm, &request);
  wait(&request, true, "a gather");
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    displs[static_cast<size_t>(r)] = total;
    total += counts[static_cast<size_t>(r)];
  }
  all.assign(rank_ == root ? static_cast<size_t>(total) : 0, 0.0f);
  MPI_Igatherv(mine.data(), n_mine, MPI_FLOAT, all.data(), counts.data(), displs.data(), MPI_FLOAT, root, comm_->comm,
               &request);
  wait(&request, true, "a gather");
  count(mine.size() * sizeof(float), seconds_since(start));
}

void MpiCommunicator::all_gather(std::span<const uint8_t> mine, std::vector<uint8_t>& all) {
  const auto start = std::chrono::steady_clock::now();
  const int n_mine = static_cast<int>(mine.size());
  all.assign(mine.size() * static_cast<size_t>(size_), 0);
  MPI_Request request;
  MPI_Iallgather(mine.data(), n_mine, MPI_BYTE, all.data(), n_mine, MPI_BYTE, comm_->comm, &request);
  wait(&request, true, "an all-gather");
  count(mine.size(), seconds_since(start));
}

// A size, then the bytes: the receiver waits for the size with the deadline (the sender is one stage earlier and
// sends when its part of the step is done).
void MpiCommunicator::send(std::span<const uint8_t> bytes, int to) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t n = bytes.size();
  MPI_Request request;
  MPI_Isend(&n, 1, MPI_UINT64_T, to, kDataTag, comm_->comm, &request);
  wait(&request, true, "a send");
  MPI_Isend(bytes.data(), static_cast<int>(n), MPI_BYTE, to, kDataTag, comm_->comm, &request);
  wait(&request, true, "a send");
  count(n, seconds_since(start));
}

void MpiCommunicator::recv(std::vector<uint8_t>& bytes, int from) {
  uint64_t n = 0;
  MPI_Request request;
  MPI_Irecv(&n, 1, MPI_UINT64_T, from, kDataTag, comm_->comm, &request);
  wait(&request, true, "a receive");
  bytes.resize(n);
  MPI_Irecv(bytes.data(), static_cast<int>(n), MPI_BYTE, from, kDataTag, comm_->comm, &request);
  wait(&request, true, "a receive");
}

}  // namespace tessera::collective
