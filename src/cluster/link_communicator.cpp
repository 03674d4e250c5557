// LinkCommunicator: every collective is pieces (CollectiveData messages) sent and received on the pair links. A
// wait has the collective deadline and the link's own liveness (heartbeats: a stopped member is silent within
// seconds, a killed one closes its socket); the first failure is sent to every member and closes the links, so the
// whole group ends the step with the same message, naming the member at fault.
#include "cluster/link_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "tensor/fp16.h"
#include "util/error.h"

namespace tessera::cluster {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

const char* op_name(uint16_t op) {
  switch (op) {
    case 1:
      return "an all-reduce";
    case 2:
      return "a broadcast";
    case 3:
      return "a gather";
    case 4:
      return "an all-gather";
    case 5:
      return "a point-to-point message";
    default:
      return "an unknown collective";
  }
}

// [first, last) of chunk c when `n` values are cut into `parts` chunks.
std::pair<size_t, size_t> chunk(size_t n, int parts, int c) {
  const auto p = static_cast<size_t>(parts);
  const auto i = static_cast<size_t>(c);
  return {n * i / p, n * (i + 1) / p};
}

}  // namespace

LinkCommunicator::LinkCommunicator(int rank, std::vector<LinkMember> members, LinkOptions options)
    : rank_(rank), members_(std::move(members)), options_(options) {
  const int n = size();
  if (n < 1 || rank_ < 0 || rank_ >= n) fail("a group of {} members has no rank {}", n, rank_);
  for (int r = 0; r < n; ++r) {
    if ((r == rank_) != (members_[static_cast<size_t>(r)].link == nullptr)) {
      fail("group member {}: {}", describe(r), r == rank_ ? "a link to itself" : "no link");
    }
  }
  sent_.assign(static_cast<size_t>(n), 0);
  received_.assign(static_cast<size_t>(n), 0);
  pieces_.resize(static_cast<size_t>(n));
}

LinkCommunicator::~LinkCommunicator() {
  for (auto& m : members_) {
    if (m.link) m.link->close(failure_.empty() ? "group over" : "group failed");
  }
}

std::string LinkCommunicator::describe(int member) const {
  const LinkMember& m = members_.at(static_cast<size_t>(member));
  if (m.address.empty()) return fmt::format("rank {}: {}", member, m.name);
  return fmt::format("rank {}: {} ({})", member, m.name, m.address);
}

void LinkCommunicator::check_usable() const {
  if (!failure_.empty()) throw Error(fmt::format("the group failed earlier: {}", failure_));
}

void LinkCommunicator::abort(const std::string& why) {
  {
    std::lock_guard lock(abort_mutex_);
    abort_why_ = why;
  }
  aborted_.store(true);
}

void LinkCommunicator::fail_group(const std::string& why) {
  if (failure_.empty()) failure_ = why;
  const std::string text = fmt::format("{} gave up: {}", describe(rank_), why);
  for (auto& m : members_) {
    if (!m.link) continue;
    try {
      m.link->send(net::error_message(net::ErrorCode::Internal, text));
    } catch (const std::exception&) {
      // That member is gone already; the others still hear it.
    }
  }
  for (auto& m : members_) {
    if (m.link) m.link->close("group failed");
  }
  throw Error(why);
}

void LinkCommunicator::put(int to, Op op, std::span<const uint8_t> bytes, const char* what) {
  net::CollectiveData piece;
  piece.op = static_cast<uint16_t>(op);
  piece.seq = sent_[static_cast<size_t>(to)]++;
  piece.payload.assign(bytes.begin(), bytes.end());
  try {
    members_[static_cast<size_t>(to)].link->send(piece);
  } catch (const std::exception& e) {
    fail_group(fmt::format("{}: sending to {} failed: {}", what, describe(to), e.what()));
  }
  bytes_out_ += bytes.size();
}

void LinkCommunicator::take(int from, Op op, std::vector<uint8_t>& out, Clock::time_point until, const char* what) {
  auto& link = *members_[static_cast<size_t>(from)].link;
  for (;;) {
    if (aborted_.load()) {
      std::string why;
      {
        std::lock_guard lock(abort_mutex_);
        why = abort_why_;
      }
      fail_group(why);
    }
    const auto now = Clock::now();
    if (now >= until) {
      fail_group(
          fmt::format("{} did not complete within {:.1f} s: nothing came from {} (it stopped, hangs, or waits "
                      "in another collective)",
                      what, std::chrono::duration<double>(options_.timeout).count(), describe(from)));
    }
    // Without a deadline the link's heartbeats still end the wait when the member dies or stops.
    // In slices, so an abort() is seen within a quarter of a second.
    constexpr std::chrono::milliseconds kSlice(250);
    const auto wait = until == Clock::time_point::max()
                          ? kSlice
                          : std::min(kSlice, std::chrono::ceil<std::chrono::milliseconds>(until - now));
    std::optional<net::Message> msg;
    try {
      msg = link.recv(wait);
    } catch (const std::exception& e) {
      fail_group(fmt::format("{}: the link to {} failed: {}", what, describe(from), e.what()));
    }
    if (!msg) continue;
    if (auto* data = std::get_if<net::CollectiveData>(&*msg)) {
      const uint64_t want = received_[static_cast<size_t>(from)]++;
      if (data->seq != want || data->op != static_cast<uint16_t>(op)) {
        fail_group(fmt::format("{}: {} sent piece {} of {}, expected piece {} of {} (the members disagree on the step)",
                               what, describe(from), data->seq, op_name(data->op), want,
                               op_name(static_cast<uint16_t>(op))));
      }
      out.swap(data->payload);
      return;
    }
    if (auto* error = std::get_if<net::ErrorMsg>(&*msg)) fail_group(fmt::format("{}: {}", what, error->message));
    if (auto* bye = std::get_if<net::Bye>(&*msg)) {
      fail_group(fmt::format("{}: {} left the group ({})", what, describe(from), bye->reason));
    }
    fail_group(fmt::format("{}: {} sent an unexpected {} message", what, describe(from),
                           net::msg_type_name(net::type_of(*msg))));
  }
}

void LinkCommunicator::encode(std::span<const float> values, std::vector<uint8_t>& out) const {
  const size_t width = net::wire_type_size(options_.wire);
  out.resize(values.size() * width);
  if (options_.wire == net::WireType::F32) {
    if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
    return;
  }
  constexpr float kHalfMax = 65504.0f;  // f16 has no room above: a partial sum saturates rather than turning inf
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = options_.wire == net::WireType::F16 ? fp32_to_fp16(std::clamp(values[i], -kHalfMax, kHalfMax))
                                                           : fp32_to_bf16(values[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
}

void LinkCommunicator::decode(std::span<const uint8_t> bytes, std::span<float> out, const char* what, int from) {
  const size_t width = net::wire_type_size(options_.wire);
  if (bytes.size() != out.size() * width) {
    fail_group(fmt::format("{}: {} sent {} bytes, expected {} (the members disagree on the step)", what, describe(from),
                           bytes.size(), out.size() * width));
  }
  if (options_.wire == net::WireType::F32) {
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
    return;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    out[i] = options_.wire == net::WireType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
  }
}

void LinkCommunicator::all_reduce_sum(std::span<float> data) {
  check_usable();
  const auto start = Clock::now();
  bytes_out_ = 0;
  if (size() > 1) {
    if (data.size_bytes() <= options_.direct_max_bytes) {
      direct_all_reduce(data);
    } else {
      ring_all_reduce(data);
    }
  }
  count(bytes_out_, seconds_since(start));
}

// Every member sends its whole buffer to every other, then each adds the n buffers in rank order (its own as the
// wire carries it), so every member computes the same sum from the same inputs.
void LinkCommunicator::direct_all_reduce(std::span<float> data) {
  const char* what = "an all-reduce";
  const int n = size();
  encode(data, wire_);
  for (int k = 1; k < n; ++k) put((rank_ + k) % n, Op::AllReduce, wire_, what);
  const auto until = deadline();
  for (int k = 1; k < n; ++k) {
    const int from = (rank_ + n - k) % n;
    take(from, Op::AllReduce, pieces_[static_cast<size_t>(from)], until, what);
  }
  pieces_[static_cast<size_t>(rank_)].swap(wire_);
  scratch_.resize(data.size());
  for (int r = 0; r < n; ++r) {
    decode(pieces_[static_cast<size_t>(r)], scratch_, what, r);
    if (r == 0) {
      std::copy(scratch_.begin(), scratch_.end(), data.begin());
    } else {
      for (size_t i = 0; i < data.size(); ++i) data[i] += scratch_[i];
    }
  }
  pieces_[static_cast<size_t>(rank_)].swap(wire_);
}

// Reduce-scatter, then all-gather, around the ring rank -> rank + 1. Each chunk's sum is made once, by the member
// that completes it, and travels from there as it is, so every member ends with the same bits. Rank 0 receives
// before it sends in each step and the others send first: a chunk larger than the sockets' buffers cannot leave
// every member blocked in a send.
void LinkCommunicator::ring_all_reduce(std::span<float> data) {
  const char* what = "an all-reduce";
  const int n = size();
  const int next = (rank_ + 1) % n;
  const int prev = (rank_ + n - 1) % n;
  const auto step = [&](int send_chunk, int recv_chunk, bool add) {
    const auto [s0, s1] = chunk(data.size(), n, send_chunk);
    // Plain names: clang 14 does not let a lambda capture a structured binding.
    const auto recv_range = chunk(data.size(), n, recv_chunk);
    const size_t r0 = recv_range.first;
    const size_t r1 = recv_range.second;
    const auto receive = [&] {
      take(prev, Op::AllReduce, piece_, deadline(), what);
      scratch_.resize(r1 - r0);
      decode(piece_, scratch_, what, prev);
      for (size_t i = r0; i < r1; ++i) data[i] = add ? scratch_[i - r0] + data[i] : scratch_[i - r0];
    };
    if (rank_ == 0) receive();
    encode(data.subspan(s0, s1 - s0), wire_);
    put(next, Op::AllReduce, wire_, what);
    if (rank_ != 0) receive();
  };
  for (int s = 0; s < n - 1; ++s) step((rank_ - s + n) % n, (rank_ - s - 1 + 2 * n) % n, true);
  // This member completed chunk rank + 1; with a narrow wire it keeps the value the others will receive.
  const int own = (rank_ + 1) % n;
  if (options_.wire != net::WireType::F32) {
    const auto [o0, o1] = chunk(data.size(), n, own);
    encode(data.subspan(o0, o1 - o0), wire_);
    decode(wire_, data.subspan(o0, o1 - o0), what, rank_);
  }
  for (int s = 0; s < n - 1; ++s) step((own - s + n) % n, (own - s - 1 + n) % n, false);
}

// From root 0 a broadcast is how the followers wait for rank 0's next operation: no deadline (a server waits for
// requests), the links' heartbeats still tell a dead or stopped root. From other roots it is part of a step.
void LinkCommunicator::broadcast(std::vector<uint8_t>& bytes, int root) {
  check_usable();
  const auto start = Clock::now();
  bytes_out_ = 0;
  if (rank_ == root) {
    for (int k = 1; k < size(); ++k) put((root + k) % size(), Op::Broadcast, bytes, "a broadcast");
  } else {
    take(root, Op::Broadcast, bytes, root == 0 ? Clock::time_point::max() : deadline(), "a broadcast");
  }
  count(bytes_out_, rank_ == root ? seconds_since(start) : 0.0);
}

void LinkCommunicator::gather(std::span<const float> mine, std::vector<float>& all, int root) {
  check_usable();
  const auto start = Clock::now();
  bytes_out_ = 0;
  const std::span<const uint8_t> raw(reinterpret_cast<const uint8_t*>(mine.data()), mine.size_bytes());
  all.clear();
  if (rank_ != root) {
    put(root, Op::Gather, raw, "a gather");
  } else {
    const auto until = deadline();
    for (int r = 0; r < size(); ++r) {
      if (r == root) {
        all.insert(all.end(), mine.begin(), mine.end());
        continue;
      }
      take(r, Op::Gather, piece_, until, "a gather");
      if (piece_.size() % sizeof(float) != 0) fail_group(fmt::format("a gather: {} sent a partial float", describe(r)));
      const size_t at = all.size();
      all.resize(at + piece_.size() / sizeof(float));
      if (!piece_.empty()) std::memcpy(all.data() + at, piece_.data(), piece_.size());
    }
  }
  count(bytes_out_, seconds_since(start));
}

// Direct: everyone's bytes to everyone (the sampling exchanges: a few KiB). Larger ones go through rank 0, so no
// two members block each other in sends.
void LinkCommunicator::all_gather(std::span<const uint8_t> mine, std::vector<uint8_t>& all) {
  check_usable();
  const char* what = "an all-gather";
  const auto start = Clock::now();
  bytes_out_ = 0;
  const int n = size();
  const auto until = deadline();
  const auto expect = [&](int r) {
    if (pieces_[static_cast<size_t>(r)].size() != mine.size()) {
      fail_group(fmt::format("{}: {} sent {} bytes, this member {}", what, describe(r),
                             pieces_[static_cast<size_t>(r)].size(), mine.size()));
    }
  };
  all.clear();
  if (mine.size() * static_cast<size_t>(n) <= options_.direct_max_bytes) {
    for (int k = 1; k < n; ++k) put((rank_ + k) % n, Op::AllGather, mine, what);
    for (int r = 0; r < n; ++r) {
      if (r == rank_) {
        all.insert(all.end(), mine.begin(), mine.end());
        continue;
      }
      take(r, Op::AllGather, pieces_[static_cast<size_t>(r)], until, what);
      expect(r);
      all.insert(all.end(), pieces_[static_cast<size_t>(r)].begin(), pieces_[static_cast<size_t>(r)].end());
    }
  } else if (rank_ == 0) {
    all.assign(mine.begin(), mine.end());
    for (int r = 1; r < n; ++r) {
      take(r, Op::AllGather, pieces_[static_cast<size_t>(r)], until, what);
      expect(r);
      all.insert(all.end(), pieces_[static_cast<size_t>(r)].begin(), pieces_[static_cast<size_t>(r)].end());
    }
    for (int r = 1; r < n; ++r) put(r, Op::AllGather, all, what);
  } else {
    put(0, Op::AllGather, mine, what);
    take(0, Op::AllGather, all, until, what);
    if (all.size() != mine.size() * static_cast<size_t>(n)) {
      fail_group(fmt::format("{}: {} sent {} bytes, expected {}", what, describe(0), all.size(),
                             mine.size() * static_cast<size_t>(n)));
    }
  }
  count(bytes_out_, seconds_since(start));
}

void LinkCommunicator::send(std::span<const uint8_t> bytes, int to) {
  check_usable();
  if (to < 0 || to >= size() || to == rank_) fail("rank {}: cannot send to rank {}", rank_, to);
  const auto start = Clock::now();
  bytes_out_ = 0;
  put(to, Op::PointToPoint, bytes, "a send");
  count(bytes_out_, seconds_since(start));
}

void LinkCommunicator::recv(std::vector<uint8_t>& bytes, int from) {
  check_usable();
  if (from < 0 || from >= size() || from == rank_) fail("rank {}: cannot receive from rank {}", rank_, from);
  take(from, Op::PointToPoint, bytes, deadline(), "a receive");
}

}  // namespace tessera::cluster
