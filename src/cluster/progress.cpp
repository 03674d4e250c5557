// TransferProgress: redraws at most ten times a second on a terminal; rates are averaged over the whole transfer.
#include "cluster/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace tessera::cluster {

TransferProgress::TransferProgress(std::string label, uint64_t total)
    : label_(std::move(label)),
      total_(total),
      tty_(isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

std::string TransferProgress::format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes);
  size_t u = 0;
  while (value >= 1024.0 && u + 1 < std::size(units)) {
    value /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[u]);
}

void TransferProgress::update(uint64_t done) {
  if (total_ == 0 || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool last = done >= total_;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
  const double fraction = static_cast<double>(done) / static_cast<double>(total_);
  const std::string text = fmt::format("{}: {} of {} ({:.0f}%, {}/s)", label_, format_bytes(done), format_bytes(total_),
                                       100.0 * fraction, format_bytes(static_cast<uint64_t>(rate)));
  if (tty_) {
    if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(fraction * kWidth);
    fmt::print(stderr, "\r[{}{}] {}\x1b[K", std::string(static_cast<size_t>(filled), '#'),
               std::string(static_cast<size_t>(kWidth - filled), ' '), text);
    if (last) std::fputc('\n', stderr);
  } else {
    const int tenth = static_cast<int>(fraction * 10.0);
    if (tenth <= last_tenth_ && !last) return;
    last_tenth_ = tenth;
    fmt::print(stderr, "{}\n", text);
  }
  std::fflush(stderr);
  finished_ = last;
}

}  // namespace tessera::cluster
