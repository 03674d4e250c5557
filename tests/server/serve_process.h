// Test helpers for `tessera serve` as a child process on 127.0.0.1 (port chosen by the server), and a raw TCP
// client for what httplib's client cannot do on purpose (hang up mid-stream, hold a connection open).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tessera::test {

class ServeProcess {
 public:
  using Env = std::vector<std::pair<std::string, std::string>>;
  // Starts `tessera serve --port 0 ARGS...` (with these extra environment variables) and waits (bounded) until it
  // listens and its log says ready.
  explicit ServeProcess(std::vector<std::string> args, Env env = {});
  // SIGTERM, then SIGKILL if it has not exited after a few seconds.
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Everything the server wrote to standard error so far.
  std::string log() const;
  // Stops it with SIGTERM and returns its exit code (128 + signal when killed).
  int stop();
  // The resident memory of the server process (VmRSS), in bytes.
  uint64_t rss_bytes() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int err_fd_ = -1;
  mutable std::string log_;
  int exit_code_ = -1;
  void drain(std::chrono::milliseconds wait) const;
};

// A plain TCP connection to 127.0.0.1:port.
class RawClient {
 public:
  explicit RawClient(int port);
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  void send(const std::string& bytes);
  // Reads until `needle` has been received or the timeout passes; returns everything received so far.
  const std::string& read_until(const std::string& needle, std::chrono::milliseconds timeout);
  void close();

 private:
  int fd_ = -1;
  std::string received_;
};

// A POST request as raw bytes.
std::string http_post(const std::string& path, const std::string& body, const std::string& extra_headers = "");

}  // namespace tessera::test
