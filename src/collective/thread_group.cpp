// A generation-counted barrier around each collective; sums run in rank order on every rank, so every rank gets
// the same bits.
#include "collective/thread_group.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "util/error.h"

namespace tessera::collective {

class ThreadGroup::Member : public Communicator {
 public:
  Member(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.n_; }

  void all_reduce_sum(std::span<float> data) override {
    const auto start = std::chrono::steady_clock::now();
    group_.slots_[static_cast<size_t>(rank_)].assign(data.begin(), data.end());
    group_.arrive_and_wait(rank_);
    for (size_t i = 0; i < data.size(); ++i) {
      float sum = 0.0f;
      for (const auto& slot : group_.slots_) {
        if (slot.size() != data.size()) fail("all-reduce: rank sizes differ ({} and {})", slot.size(), data.size());
        sum += slot[i];
      }
      data[i] = sum;
    }
    group_.arrive_and_wait(rank_);
    count(data.size() * sizeof(float), start);
  }

  void broadcast(std::vector<uint8_t>& bytes, int root) override {
    const auto start = std::chrono::steady_clock::now();
    if (rank_ == root) group_.bytes_ = bytes;
    group_.arrive_and_wait(rank_);
    if (rank_ != root) bytes = group_.bytes_;
    group_.arrive_and_wait(rank_);
    count(rank_ == root ? bytes.size() : 0, start);
  }

  void gather(std::span<const float> mine, std::vector<float>& all, int root) override {
    const auto start = std::chrono::steady_clock::now();
    group_.slots_[static_cast<size_t>(rank_)].assign(mine.begin(), mine.end());
    group_.arrive_and_wait(rank_);
    all.clear();
    if (rank_ == root) {
      for (const auto& slot : group_.slots_) all.insert(all.end(), slot.begin(), slot.end());
    }
    group_.arrive_and_wait(rank_);
    count(mine.size() * sizeof(float), start);
  }

  void all_gather(std::span<const uint8_t> mine, std::vector<uint8_t>& all) override {
    const auto start = std::chrono::steady_clock::now();
    group_.byte_slots_[static_cast<size_t>(rank_)].assign(mine.begin(), mine.end());
    group_.arrive_and_wait(rank_);
    all.clear();
    for (const auto& slot : group_.byte_slots_) {
      if (slot.size() != mine.size()) fail("all-gather: rank sizes differ ({} and {} bytes)", slot.size(), mine.size());
      all.insert(all.end(), slot.begin(), slot.end());
    }
    group_.arrive_and_wait(rank_);
    count(mine.size(), start);
  }

  void send(std::span<const uint8_t> bytes, int to) override {
    const auto start = std::chrono::steady_clock::now();
    if (to < 0 || to >= group_.n_ || to == rank_) fail("rank {}: cannot send to rank {}", rank_, to);
    {
      std::lock_guard lock(group_.mutex_);
      group_.mail_[{rank_, to}].emplace_back(bytes.begin(), bytes.end());
    }
    group_.cv_.notify_all();
    count(bytes.size(), start);
  }

  void recv(std::vector<uint8_t>& bytes, int from) override {
    if (from < 0 || from >= group_.n_ || from == rank_) fail("rank {}: cannot receive from rank {}", rank_, from);
    std::unique_lock lock(group_.mutex_);
    auto& box = group_.mail_[{from, rank_}];
    if (!group_.cv_.wait_for(lock, group_.timeout_, [&] { return !box.empty() || group_.broken_; })) {
      group_.broken_ = true;
      group_.cv_.notify_all();
      fail("rank {}: nothing came from rank {} within {} s (it died or hangs)", rank_, from,
           group_.timeout_.count() / 1000.0);
    }
    if (box.empty()) fail("rank {}: another rank of the group failed", rank_);
    bytes = std::move(box.front());
    box.pop_front();
  }

 private:
  void count(size_t bytes, std::chrono::steady_clock::time_point start) {
    Communicator::count(bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

  ThreadGroup& group_;
  int rank_;
};

ThreadGroup::ThreadGroup(int n, std::chrono::milliseconds timeout) : n_(n), timeout_(timeout) {
  if (n < 1) fail("a group needs at least one rank, got {}", n);
  slots_.resize(static_cast<size_t>(n));
  byte_slots_.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) members_.push_back(std::make_unique<Member>(*this, r));
}

ThreadGroup::~ThreadGroup() = default;

Communicator& ThreadGroup::rank(int r) {
  if (r < 0 || r >= n_) fail("rank {} is outside the group of {}", r, n_);
  return *members_[static_cast<size_t>(r)];
}

void ThreadGroup::arrive_and_wait(int rank) {
  std::unique_lock lock(mutex_);
  if (broken_) fail("rank {}: another rank of the group failed", rank);
  const uint64_t gen = generation_;
  if (++arrived_ == n_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  if (!cv_.wait_for(lock, timeout_, [&] { return generation_ != gen || broken_; })) {
    broken_ = true;
    cv_.notify_all();
    fail("rank {}: the other ranks did not reach the collective within {} s (one died or hangs)", rank,
         timeout_.count() / 1000.0);
  }
  if (generation_ == gen) fail("rank {}: another rank of the group failed", rank);
}

}  // namespace tessera::collective
