// The collectives of a tensor/expert-parallel group over the workers' authenticated links (TLS with the cluster
// key): a full mesh of net::Connections, one per pair of members, so partial sums go straight from worker to worker
// instead of through the head. Same interface and the same sums on every rank as the MPI backend.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "net/codec.h"
#include "net/transport.h"

namespace tessera::cluster {

struct LinkMember {
  std::string name;                       // "b", as --workers names it; "head" for rank 0
  std::string address;                    // "127.0.0.1:5555" (empty for a head that does not listen)
  std::shared_ptr<net::Connection> link;  // to this member; null for the member that owns the communicator
};

struct LinkOptions {
  // How long a collective waits for a member before the group fails with its name (--collective-timeout).
  std::chrono::milliseconds timeout{30000};
  // The partial sums of an all-reduce on the wire: f32, or f16/bf16 (half the bytes; accumulation stays f32).
  net::WireType wire = net::WireType::F32;
  // All-reduces up to this many bytes (f32) go as a direct exchange (every member sends its whole buffer to every
  // other: one round trip); larger ones as a ring (reduce-scatter, then all-gather: 2(n-1)/n of the buffer each).
  size_t direct_max_bytes = size_t{32} << 10;
};

class LinkCommunicator : public collective::Communicator {
 public:
  // members: every member by rank, this one's link null. Takes the links over: they carry nothing else while the
  // communicator lives, and it closes them when destroyed.
  LinkCommunicator(int rank, std::vector<LinkMember> members, LinkOptions options);
  ~LinkCommunicator() override;
  LinkCommunicator(const LinkCommunicator&) = delete;
  LinkCommunicator& operator=(const LinkCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  void all_reduce_sum(std::span<float> data) override;
  void broadcast(std::vector<uint8_t>& bytes, int root) override;
  void gather(std::span<const float> mine, std::vector<float>& all, int root) override;
  void all_gather(std::span<const uint8_t> mine, std::vector<uint8_t>& all) override;
  void send(std::span<const uint8_t> bytes, int to) override;
  void recv(std::vector<uint8_t>& bytes, int from) override;

  // "rank 1: worker b (127.0.0.1:5555)"
  std::string describe(int member) const;
  // Set after a failure: every later call throws it again (the links are closed).
  bool failed() const override { return !failure_.empty(); }
  // From another thread (a worker told to stop): the wait in progress, or the next one, ends the group with `why`,
  // told to every member, within a quarter of a second.
  void abort(const std::string& why);

 private:
  enum class Op : uint16_t { AllReduce = 1, Broadcast = 2, Gather = 3, AllGather = 4, PointToPoint = 5 };
  using Clock = std::chrono::steady_clock;

  void check_usable() const;
  void put(int to, Op op, std::span<const uint8_t> bytes, const char* what);
  // The next piece from `from`, which must belong to `op`; waits until `until` (Clock::time_point::max(): as long as
  // the link lives, which its heartbeats tell).
  void take(int from, Op op, std::vector<uint8_t>& out, Clock::time_point until, const char* what);
  // Records the failure, tells every member (an Error message, then Bye) and throws it.
  [[noreturn]] void fail_group(const std::string& why);
  Clock::time_point deadline() const { return Clock::now() + options_.timeout; }

  void direct_all_reduce(std::span<float> data);
  void ring_all_reduce(std::span<float> data);
  // Floats <-> their wire form in options_.wire (f16/bf16 clamped to the finite range).
  void encode(std::span<const float> values, std::vector<uint8_t>& out) const;
  void decode(std::span<const uint8_t> bytes, std::span<float> out, const char* what, int from);

  int rank_;
  std::vector<LinkMember> members_;
  LinkOptions options_;
  std::vector<uint64_t> sent_, received_;  // pieces on each link, both ways
  std::string failure_;
  std::atomic<bool> aborted_{false};
  std::mutex abort_mutex_;
  std::string abort_why_;
  uint64_t bytes_out_ = 0;  // payload bytes of the current collective
  std::vector<uint8_t> wire_, piece_;
  std::vector<std::vector<uint8_t>> pieces_;
  std::vector<float> scratch_;
};

}  // namespace tessera::cluster
