// The all-reduce sweep: identical calls on every rank (a collective), timed on each.
#include "collective/sweep.h"

#include <algorithm>
#include <chrono>

namespace tessera::collective {

std::vector<size_t> default_sweep_floats() { return {1, 1024, 8192, 262144, 1048576}; }

std::vector<SweepPoint> sweep_all_reduce(Communicator& comm, std::span<const size_t> floats, int repeats) {
  const CollectiveStats before = comm.stats();
  std::vector<SweepPoint> out;
  std::vector<float> buffer;
  for (size_t n : floats) {
    buffer.assign(n, 1.0f);
    // Large buffers take long enough that a few repeats give a stable median.
    const int timed = n >= 262144 ? std::max(3, repeats / 4) : std::max(3, repeats);
    std::vector<double> times;
    for (int i = 0; i < 2 + timed; ++i) {
      std::fill(buffer.begin(), buffer.end(), 1.0f);
      const auto start = std::chrono::steady_clock::now();
      comm.all_reduce_sum(buffer);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (i >= 2) times.push_back(s);
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    out.push_back({n * sizeof(float), times[times.size() / 2]});
  }
  comm.restore_stats(before);
  return out;
}

std::vector<size_t> default_p2p_bytes() { return {4, 4096, 16384, 262144, 1048576}; }

std::vector<SweepPoint> sweep_point_to_point(Communicator& comm, int block, std::span<const size_t> bytes,
                                             int repeats) {
  const int r = comm.rank();
  const int peer = ((r / block) ^ 1) * block + r % block;
  if (block <= 0 || peer >= comm.size()) return {};
  const bool first = r < peer;
  const CollectiveStats before = comm.stats();
  std::vector<SweepPoint> out;
  std::vector<uint8_t> message, back;
  for (size_t n : bytes) {
    message.assign(n, 1);
    const int timed = n >= 262144 ? std::max(3, repeats / 4) : std::max(3, repeats);
    std::vector<double> times;
    for (int i = 0; i < 2 + timed; ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (first) {
        comm.send(message, peer);
        comm.recv(back, peer);
      } else {
        comm.recv(back, peer);
        comm.send(back, peer);
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (i >= 2) times.push_back(s / 2.0);
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    out.push_back({n, times[times.size() / 2]});
  }
  comm.restore_stats(before);
  return out;
}

}  // namespace tessera::collective
