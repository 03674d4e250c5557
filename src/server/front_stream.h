// httplib::Stream over a connection the front has already read a request from: the buffered bytes come first,
// then the socket, every read bounded by the request's deadline and every write by the write time.
// Internal to src/server.
#pragma once

#include <httplib.h>

#include <chrono>
#include <string>

namespace tessera::server {

class FrontStream final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;
  FrontStream(int fd, std::string buffered, Clock::time_point read_deadline, std::chrono::milliseconds write_time);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

  bool read_timed_out() const { return read_timed_out_; }
  bool wrote() const { return wrote_; }
  // Bytes received but not read (a pipelined next request): they stay with the connection.
  std::string take_unread();

 private:
  int fd_;
  std::string buffered_;
  size_t pos_ = 0;
  Clock::time_point read_deadline_;
  std::chrono::milliseconds write_time_;
  bool read_timed_out_ = false;
  bool wrote_ = false;
};

}  // namespace tessera::server
