// HttpFront: one poll loop owns every connection between requests; handler threads own one while they answer it
// and give it back for the next request (keep-alive), so a thread never waits for a client's bytes.
#include "server/http_front.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "server/front_stream.h"
#include "server/http_head.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::server {

namespace {

constexpr size_t kHealthQueue = 64;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

HttpFront::HttpFront(Options options, Handler handler, ErrorBody error_body)
    : options_(std::move(options)), handler_(std::move(handler)), error_body_(std::move(error_body)) {
  work_.bound = std::max<size_t>(options_.limits.queued_requests, 1);
  health_.bound = kHealthQueue;
}

HttpFront::~HttpFront() {
  stop();
  close_fd(listener_);
  close_fd(wake_fd_);
}

int HttpFront::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0 || !found)
    fail("cannot listen on {}: not an address of this machine", host);
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR only (restart while old connections sit in TIME_WAIT): SO_REUSEPORT would let a second server
    // take half the connections.
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 512) != 0) close_fd(fd);
  }
  freeaddrinfo(found);
  if (fd < 0) fail("cannot listen on {}:{} (in use, or not an address of this machine?)", host, port);
  listener_ = fd;
  sockaddr_storage bound{};
  socklen_t n = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &n);
  if (bound.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in&>(bound).sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6&>(bound).sin6_port);
}

void HttpFront::start() {
  if (listener_ < 0) fail("the HTTP front must be bound before it starts");
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) fail("cannot create the HTTP front's wake-up descriptor");
  loop_thread_ = std::thread([this] { loop(); });
  for (int i = 0; i < std::max(options_.threads, 1); ++i) handlers_.emplace_back([this] { serve(work_); });
  handlers_.emplace_back([this] { serve(health_); });
}

void HttpFront::stop() {
  if (stopping_.exchange(true)) return;
  wake();
  if (loop_thread_.joinable()) loop_thread_.join();
  for (Queue* q : {&work_, &health_}) {
    std::lock_guard lock(q->mutex);
    q->ready.notify_all();
  }
  for (auto& t : handlers_) t.join();
  handlers_.clear();
  for (Queue* q : {&work_, &health_})
    for (auto& c : q->items) close_fd(c.fd);
  for (auto& c : returned_) close_fd(c.fd);
  returned_.clear();
}

void HttpFront::wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void HttpFront::loop() {
  std::vector<Connection> waiting;
  std::vector<pollfd> fds;
  try {
    while (!stopping_) {
      {
        std::lock_guard lock(returned_mutex_);
        for (auto& c : returned_) waiting.push_back(std::move(c));
        returned_.clear();
      }
      // A connection given back with a pipelined request may already hold all of it.
      for (auto& c : waiting)
        if (c.fd >= 0 && !c.bytes.empty() && !evaluate(c)) c.fd = -1;
      std::erase_if(waiting, [](const Connection& c) { return c.fd < 0; });

      fds.assign({pollfd{wake_fd_, POLLIN, 0}, pollfd{listener_, POLLIN, 0}});
      Clock::time_point next = Clock::now() + std::chrono::seconds(1);
      for (const auto& c : waiting) {
        fds.push_back(pollfd{c.fd, POLLIN, 0});
        next = std::min(next, c.deadline);
      }
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
      if (poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(wait + 1, 0, 1000))) < 0 && errno != EINTR)
        fail("the HTTP front's poll failed: {}", std::strerror(errno));
      if (fds[0].revents) {
        uint64_t n = 0;
        [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &n, sizeof n);
      }
      const size_t polled = waiting.size();
      for (size_t i = 0; i < polled; ++i)
        if (fds[i + 2].revents && !receive(waiting[i])) waiting[i].fd = -1;
      const Clock::time_point now = Clock::now();
      for (auto& c : waiting) {
        if (c.fd < 0 || now < c.deadline) continue;
        if (c.started) {
          ++timed_out_;
          answer_and_close(c, 408, "the request did not arrive in time");
        } else {
          close_fd(c.fd);  // an idle kept-alive connection
        }
      }
      std::erase_if(waiting, [](const Connection& c) { return c.fd < 0; });
      if (fds[1].revents) accept_all(waiting);
    }
  } catch (const std::exception& e) {
    log_warn("serve: the HTTP front stopped: {}", e.what());
  }
  for (auto& c : waiting) close_fd(c.fd);
}

void HttpFront::accept_all(std::vector<Connection>& waiting) {
  while (true) {
    int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or an error of that one connection
    if (waiting.size() >= options_.limits.waiting_connections) {
      ++refused_;
      const Clock::time_point now = Clock::now();
      if (now - last_refusal_log_ > std::chrono::seconds(1)) {
        log_warn("serve: {} connections wait for their requests already: refusing more ({} so far)", waiting.size(),
                 refused_.load());
        last_refusal_log_ = now;
      }
      close_fd(fd);
      continue;
    }
    int yes = 1;  // token deltas are small writes that must leave at once
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    Connection c;
    c.fd = fd;
    c.started = true;
    c.deadline = Clock::now() + options_.limits.request_time;
    waiting.push_back(std::move(c));
  }
}

bool HttpFront::receive(Connection& c) {
  char chunk[16384];
  while (true) {
    const ssize_t n = recv(c.fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      if (!c.started) {
        c.started = true;
        c.deadline = Clock::now() + options_.limits.request_time;
      }
      c.bytes.append(chunk, static_cast<size_t>(n));
      // Enough for the bounds to decide; the rest waits in the socket.
      if (c.bytes.size() > options_.limits.head_bytes + options_.limits.body_bytes) break;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    close_fd(c.fd);  // the client closed, or the connection broke
    return false;
  }
  return evaluate(c);
}

bool HttpFront::evaluate(Connection& c) {
  const HeadScan scan = scan_head(c.bytes, options_.limits);
  switch (scan.state) {
    case HeadScan::State::Incomplete:
      return true;
    case HeadScan::State::TooLarge:
      answer_and_close(c, 431, scan.reason);
      return false;
    case HeadScan::State::UriTooLong:
      answer_and_close(c, 414, scan.reason);
      return false;
    case HeadScan::State::Malformed:
      answer_and_close(c, 400, scan.reason);
      return false;
    case HeadScan::State::Complete:
      break;
  }
  // Bodies within the bound are read here; a larger one goes on at once (httplib answers 413), a chunked one is
  // read by the handler under the same deadline.
  const size_t body = scan.chunked ? 0 : scan.content_length.value_or(0);
  if (body <= options_.limits.body_bytes && c.bytes.size() < scan.head_end + body) return true;
  dispatch(std::move(c), scan.method == "GET" && scan.path == "/health");
  c.fd = -1;
  return false;
}

void HttpFront::dispatch(Connection c, bool health) {
  Queue& q = health ? health_ : work_;
  {
    std::lock_guard lock(q.mutex);
    if (q.items.size() < q.bound) {
      q.items.push_back(std::move(c));
      q.ready.notify_one();
      return;
    }
  }
  ++refused_;
  answer_and_close(c, 503, "the server is busy: every handler thread is taken and the queue is full");
}

void HttpFront::serve(Queue& queue) {
  while (true) {
    Connection c;
    {
      std::unique_lock lock(queue.mutex);
      queue.ready.wait(lock, [&] { return stopping_ || !queue.items.empty(); });
      if (stopping_) return;
      c = std::move(queue.items.front());
      queue.items.pop_front();
    }
    try {
      serve_one(std::move(c));
    } catch (const std::exception& e) {
      log_warn("serve: a request failed outside its handler: {}", e.what());
    } catch (...) {
      log_warn("serve: a request failed outside its handler");
    }
  }
}

void HttpFront::serve_one(Connection c) {
  const bool last = c.served + 1 >= options_.limits.keep_alive_requests || stopping_;
  FrontStream stream(c.fd, std::move(c.bytes), c.deadline, options_.limits.write_time);
  bool closed = false;
  try {
    handler_(stream, last, closed);
  } catch (...) {
    closed = true;
  }
  if (stream.read_timed_out()) {
    ++timed_out_;
    if (!stream.wrote()) {
      answer_and_close(c, 408, "the request body did not arrive in time");
      return;
    }
    closed = true;
  }
  if (closed || last || stopping_) {
    close_fd(c.fd);
    return;
  }
  c.bytes = stream.take_unread();
  c.served += 1;
  c.started = !c.bytes.empty();
  c.deadline = Clock::now() + (c.started ? options_.limits.request_time : options_.limits.keep_alive_idle);
  give_back(std::move(c));
}

void HttpFront::give_back(Connection c) {
  {
    std::lock_guard lock(returned_mutex_);
    returned_.push_back(std::move(c));
  }
  wake();
}

void HttpFront::answer_and_close(Connection& c, int status, std::string_view message) {
  const std::string response =
      simple_response(status, error_body_(status, message), status == 503 ? options_.retry_after_seconds : 0);
  // Best effort and never blocking: the answer fits a fresh socket's send buffer.
  [[maybe_unused]] const ssize_t n = send(c.fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(c.fd, SHUT_WR);
  close_fd(c.fd);
}

}  // namespace tessera::server
