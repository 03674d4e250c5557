// Link measurement with Ping/Pong: RTT as a median (robust to one scheduling hiccup), bandwidth as a timed
// transfer minus one round trip.
#include "net/link_measure.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "util/error.h"

namespace tessera::net {
namespace {

using Clock = std::chrono::steady_clock;

// One Ping -> Pong exchange; returns its duration in seconds.
double exchange(Connection& c, uint64_t id, uint32_t send_bytes, uint32_t reply_bytes,
                std::chrono::milliseconds timeout) {
  Ping ping;
  ping.id = id;
  ping.reply_bytes = reply_bytes;
  ping.payload.assign(send_bytes, uint8_t{0xa5});
  const auto start = Clock::now();
  c.send(ping);
  const auto reply = c.recv(timeout);
  const auto end = Clock::now();
  if (!reply) fail("{}: no Pong within {:.1f} s while measuring the link", c.peer(), timeout.count() / 1000.0);
  const auto* pong = std::get_if<Pong>(&*reply);
  if (pong == nullptr) {
    fail("{}: expected Pong while measuring the link, got {}", c.peer(), msg_type_name(type_of(*reply)));
  }
  if (pong->id != id || pong->payload.size() != reply_bytes) {
    fail("{}: Pong {} with {} bytes answers Ping {} that asked for {}", c.peer(), pong->id, pong->payload.size(), id,
         reply_bytes);
  }
  return std::chrono::duration<double>(end - start).count();
}

std::string rate_text(double bytes_per_s) {
  if (bytes_per_s >= 1e9) return fmt::format("{:.2f} GB/s", bytes_per_s / 1e9);
  if (bytes_per_s >= 1e6) return fmt::format("{:.1f} MB/s", bytes_per_s / 1e6);
  return fmt::format("{:.0f} kB/s", bytes_per_s / 1e3);
}

}  // namespace

LinkMeasurement measure_link(Connection& connection, const MeasureOptions& options) {
  if (options.pings < 1) fail("measure_link: at least one ping is needed, got {}", options.pings);
  if (options.transfer_bytes < 1 || options.transfer_bytes > kMaxPingBytes) {
    fail("measure_link: transfer size {} is outside [1, {}]", options.transfer_bytes, kMaxPingBytes);
  }
  LinkMeasurement m;
  uint64_t id = 1;
  // The first exchange warms up buffers and the peer's code path; it is not counted.
  exchange(connection, id++, 0, 0, options.timeout);
  std::vector<double> rtts;
  for (int i = 0; i < options.pings; ++i) rtts.push_back(exchange(connection, id++, 0, 0, options.timeout));
  std::sort(rtts.begin(), rtts.end());
  m.rtt_s = rtts[rtts.size() / 2];
  m.pings = options.pings;
  m.transfer_bytes = options.transfer_bytes;
  // A fresh TCP connection is still in slow start: over a 10 ms path the first few MB move at a fraction of the
  // link's rate. An untimed transfer each way first opens the congestion window, so the timed one measures the
  // link, which is what the planner's per-hop times need.
  exchange(connection, id++, options.transfer_bytes, 0, options.timeout);
  const double up = exchange(connection, id++, options.transfer_bytes, 0, options.timeout);
  exchange(connection, id++, 0, options.transfer_bytes, options.timeout);
  const double down = exchange(connection, id++, 0, options.transfer_bytes, options.timeout);
  // Each transfer also paid one round trip; never let that subtraction make the time vanish.
  const auto rate = [&](double seconds) {
    return static_cast<double>(options.transfer_bytes) / std::max(seconds - m.rtt_s, seconds * 0.1);
  };
  m.upload_bytes_per_s = rate(up);
  m.download_bytes_per_s = rate(down);
  return m;
}

std::string describe(const LinkMeasurement& m) {
  return fmt::format("rtt {:.2f} ms, up {}, down {}", m.rtt_s * 1e3, rate_text(m.upload_bytes_per_s),
                     rate_text(m.download_bytes_per_s));
}

}  // namespace tessera::net
