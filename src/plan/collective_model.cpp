// The collective cost model's two numbers, from links or from measurement, and how they are shown.
#include "plan/collective_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace tessera::plan {

CollectiveProfile ring_all_reduce(int ranks, double rtt_s, double bytes_per_s, double message_overhead_s) {
  if (ranks < 1 || !(bytes_per_s > 0)) fail("internal: a ring all-reduce needs ranks and a link bandwidth");
  CollectiveProfile c;
  c.ranks = ranks;
  const double steps = 2.0 * (ranks - 1);
  c.latency_s = steps * (rtt_s / 2.0 + message_overhead_s);
  c.seconds_per_byte = steps / ranks / bytes_per_s;
  c.link_rtt_s = rtt_s;
  c.link_bytes_per_s = bytes_per_s;
  c.message_overhead_s = message_overhead_s;
  c.source = fmt::format("ring over {:g} Gbit/s, {:g} ms RTT links", bytes_per_s * 8 / 1e9, rtt_s * 1e3);
  return c;
}

CollectiveProfile link_all_reduce(int ranks, double rtt_s, double bytes_per_s, double message_overhead_s,
                                  int wire_bytes, double direct_max_bytes) {
  if (wire_bytes != 2 && wire_bytes != 4) fail("internal: {} bytes a float on the wire", wire_bytes);
  CollectiveProfile c = ring_all_reduce(ranks, rtt_s, bytes_per_s, message_overhead_s);
  c.wire_fraction = wire_bytes / 4.0;
  c.seconds_per_byte *= c.wire_fraction;
  c.direct_max_bytes = direct_max_bytes;
  c.direct_latency_s = rtt_s / 2.0 + (ranks - 1) * message_overhead_s;
  c.direct_seconds_per_byte = (ranks - 1) * c.wire_fraction / bytes_per_s;
  c.source = fmt::format("worker links, {:g} Gbit/s, {:g} ms RTT, {} wire", bytes_per_s * 8 / 1e9, rtt_s * 1e3,
                         wire_bytes == 4 ? "f32" : "16-bit");
  return c;
}

std::string collective_formula_text(const CollectiveProfile& c, double bytes) {
  if (c.measured()) {
    return fmt::format("{} each, between the sizes measured at start: {}", seconds_text(c.all_reduce_s(bytes)),
                       collectives_text(c));
  }
  const std::string over = c.link_pair.empty() ? "" : fmt::format(" (the slowest link: {})", c.link_pair);
  const std::string wire = c.wire_fraction < 1 ? " x 1/2 (16-bit on the wire)" : "";
  const int n = c.ranks;
  if (c.direct(bytes)) {
    return fmt::format(
        "direct exchange among {}: {} RTT/2 + {} x {} per message = {}; each byte x {}{} at {:.2f} GB/s{}", n,
        seconds_text(c.link_rtt_s / 2), n - 1, seconds_text(c.message_overhead_s), seconds_text(c.direct_latency_s),
        n - 1, wire, c.link_bytes_per_s / 1e9, over);
  }
  return fmt::format(
      "ring of {}: 2({}-1) x ({} RTT/2 + {} per message) = {}; each byte x 2({}-1)/{}{} at {:.2f} GB/s{}", n, n,
      seconds_text(c.link_rtt_s / 2), seconds_text(c.message_overhead_s), seconds_text(c.latency_s), n, n, wire,
      c.link_bytes_per_s / 1e9, over);
}

double CollectiveProfile::all_reduce_s(double bytes) const {
  if (samples.size() < 2) return latency_for(bytes) + bytes * seconds_per_byte_for(bytes);
  if (bytes <= samples.front().bytes) return samples.front().seconds;
  size_t i = 1;
  while (i + 1 < samples.size() && samples[i].bytes < bytes) ++i;
  const CollectiveSample& a = samples[i - 1];
  const CollectiveSample& b = samples[i];
  const double slope = b.bytes > a.bytes ? std::max(0.0, (b.seconds - a.seconds) / (b.bytes - a.bytes)) : 0.0;
  return std::max(a.seconds + (bytes - a.bytes) * slope, samples.front().seconds);
}

CollectiveProfile fit_collectives(int ranks, std::vector<CollectiveSample> samples, std::string source) {
  if (samples.empty()) fail("internal: no collective samples to fit");
  std::sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  CollectiveProfile c;
  c.ranks = ranks;
  c.source = std::move(source);
  c.latency_s = std::max(0.0, samples.front().seconds);
  double num = 0, den = 0;
  for (size_t i = 1; i < samples.size(); ++i) {
    const double b = samples[i].bytes - samples.front().bytes;
    num += b * (samples[i].seconds - c.latency_s);
    den += b * b;
  }
  c.seconds_per_byte = den > 0 ? std::max(0.0, num / den) : 0.0;
  c.samples = std::move(samples);
  return c;
}

std::string bytes_text(double bytes) {
  if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
  if (bytes < 1024.0 * 1024) return fmt::format("{:.{}f} KiB", bytes / 1024, bytes < 10 * 1024 ? 1 : 0);
  if (bytes < 1024.0 * 1024 * 1024) return fmt::format("{:.1f} MiB", bytes / 1048576);
  return fmt::format("{:.1f} GiB", bytes / 1073741824);
}

std::string seconds_text(double s) {
  if (s < 9.95e-6) return fmt::format("{:.1f} us", s * 1e6);
  if (s < 1e-3) return fmt::format("{:.0f} us", s * 1e6);
  if (s < 1.0) return fmt::format("{:.{}f} ms", s * 1e3, s < 0.01 ? 2 : s < 0.1 ? 1 : 0);
  return fmt::format("{:.2f} s", s);
}

std::string collectives_text(const CollectiveProfile& c) {
  std::string out = "all-reduce";
  for (size_t i = 0; i < c.samples.size(); ++i) {
    out +=
        fmt::format("{} {} {}", i == 0 ? "" : ",", bytes_text(c.samples[i].bytes), seconds_text(c.samples[i].seconds));
  }
  const std::string bw =
      c.seconds_per_byte > 0 ? fmt::format("{:.2f} GB/s", 1e-9 / c.seconds_per_byte) : std::string("no byte cost");
  if (c.samples.empty()) {
    out += fmt::format(" {} + bytes at {}", seconds_text(c.latency_s), bw);
    return out + fmt::format(" over {} ranks ({})", c.ranks, c.source);
  }
  return out + fmt::format(" over {} ranks", c.ranks);
}

}  // namespace tessera::plan
