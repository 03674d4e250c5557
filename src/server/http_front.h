// The HTTP front: accepts connections and reads each request in one poll loop, with a total deadline and caps on
// its head, before any thread is given to it; complete requests go to a bounded queue of handler threads, and
// GET /health to a thread of its own, so slow or silent clients cannot starve the API or the health check.
// cpp-httplib (0.11.4 has none of these bounds, and Debian ships it compiled) parses and routes each request.
// Internal to src/server.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/http_limits.h"

namespace tessera::server {

class HttpFront {
 public:
  using Clock = std::chrono::steady_clock;
  // Serves one complete request on the stream (httplib's process_request); sets connection_closed when the
  // connection must not be kept.
  using Handler = std::function<void(httplib::Stream& stream, bool close_connection, bool& connection_closed)>;
  // The JSON body of an answer the front gives itself (408, 414, 431, 503, 400).
  using ErrorBody = std::function<std::string(int status, std::string_view message)>;

  struct Options {
    HttpLimits limits;
    int threads = 64;  // handler threads (a streamed answer holds one for its duration)
    int retry_after_seconds = 1;
  };

  HttpFront(Options options, Handler handler, ErrorBody error_body);
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Binds host:port (0: any free port) and returns the port. Throws Error.
  int bind(const std::string& host, int port);
  // Starts the poll loop, the handler threads and the health thread.
  void start();
  // Closes the listener and every waiting connection, lets running handlers finish, joins every thread.
  void stop();

  // Counters for tests and logs.
  uint64_t refused() const { return refused_.load(); }
  uint64_t timed_out() const { return timed_out_.load(); }

 private:
  struct Connection {
    int fd = -1;
    std::string bytes;             // received, not yet handed to a handler
    Clock::time_point deadline{};  // of the request under way, or of the idle wait
    bool started = false;          // a request has begun (its deadline is the request time)
    size_t served = 0;             // requests answered on this connection
  };
  struct Queue {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<Connection> items;
    size_t bound = 0;
  };

  void loop();
  void accept_all(std::vector<Connection>& waiting);
  // Reads what arrived; false when the connection is finished (closed, answered or handed over).
  bool receive(Connection& c);
  bool evaluate(Connection& c);
  void dispatch(Connection c, bool health);
  void serve(Queue& queue);
  void serve_one(Connection c);
  void give_back(Connection c);
  void answer_and_close(Connection& c, int status, std::string_view message);
  void wake();

  Options options_;
  Handler handler_;
  ErrorBody error_body_;
  int listener_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> timed_out_{0};
  Clock::time_point last_refusal_log_{};
  Queue work_;
  Queue health_;
  std::mutex returned_mutex_;
  std::vector<Connection> returned_;
  std::thread loop_thread_;
  std::vector<std::thread> handlers_;
};

}  // namespace tessera::server
