// Progress of a long transfer (weights streaming to a worker) on standard error: a bar redrawn in place with \r
// when stderr is a terminal, otherwise a plain line at every 10% so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tessera::cluster {

class TransferProgress {
 public:
  // label: "worker a: receiving weights"; total: bytes expected (0: nothing to report, update() stays quiet).
  TransferProgress(std::string label, uint64_t total);
  TransferProgress(const TransferProgress&) = delete;
  TransferProgress& operator=(const TransferProgress&) = delete;

  void update(uint64_t done);  // bytes so far; the last call should pass the total

  static std::string format_bytes(uint64_t bytes);  // "310.0 MiB"

 private:
  std::string label_;
  uint64_t total_;
  bool tty_;
  int last_tenth_ = 0;  // plain lines printed up to this tenth
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  bool finished_ = false;
};

}  // namespace tessera::cluster
