// Ranks as threads of one process: a Communicator per thread over shared memory. It runs sharded stages side by
// side in one process (tests compare them with one node without a launcher; a many-socket machine could use it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "collective/communicator.h"

namespace tessera::collective {

class ThreadGroup {
 public:
  // n ranks; a collective that waits longer than `timeout` for the others fails (a rank that died or hangs).
  explicit ThreadGroup(int n, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;
  ~ThreadGroup();

  // Rank r's communicator; each rank's thread uses its own.
  Communicator& rank(int r);
  int size() const { return n_; }

 private:
  class Member;
  friend class Member;
  // Waits until every rank has arrived at this collective's phase; throws Error after the timeout.
  void arrive_and_wait(int rank);

  int n_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int arrived_ = 0;
  bool broken_ = false;
  std::vector<std::vector<float>> slots_;         // each rank's contribution to the current collective
  std::vector<uint8_t> bytes_;                    // a broadcast's payload
  std::vector<std::vector<uint8_t>> byte_slots_;  // each rank's bytes in an all-gather
  std::map<std::pair<int, int>, std::deque<std::vector<uint8_t>>> mail_;  // (from, to): messages not yet received
  std::vector<std::unique_ptr<Member>> members_;
};

}  // namespace tessera::collective
