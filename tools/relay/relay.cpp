// tessera-relay: a TCP relay that adds a fixed one-way delay to every chunk of bytes in each direction, for test
// and benchmark clusters (this kernel has no netem). It keeps byte order and caps only how much it buffers.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct RelayError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Owns one file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Endpoint {
  std::string text;  // as the user wrote it
  sockaddr_storage addr{};
  socklen_t len = 0;
};

// Parses HOST:PORT (IPv6 as [addr]:port) and resolves it; errors name the option.
Endpoint parse_endpoint(const std::string& option, const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw RelayError(fmt::format("{}: '{}' is not HOST:PORT", option, text));
  }
  std::string host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (*end != '\0' || p < 0 || p > 65535)
    throw RelayError(fmt::format("{}: '{}' is not a port (0-65535)", option, port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    throw RelayError(fmt::format("{}: cannot resolve '{}': {}", option, host, gai_strerror(rc)));
  }
  Endpoint e;
  e.text = text;
  std::memcpy(&e.addr, res->ai_addr, res->ai_addrlen);
  e.len = res->ai_addrlen;
  freeaddrinfo(res);
  return e;
}

std::string endpoint_text(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    return fmt::format("{}:{}", host, ntohs(v4->sin_port));
  }
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
  inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
  return fmt::format("[{}]:{}", host, ntohs(v6->sin6_port));
}

// Small messages must leave at once: Nagle's algorithm would add its own delay on top of ours.
void set_nodelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// One direction of a connection: a reader stamps each chunk with its due time, a writer sends it when due.
class Pipe {
 public:
  Pipe(int src, int dst, Clock::duration delay, size_t max_buffered)
      : src_(src), dst_(dst), delay_(delay), max_buffered_(max_buffered) {}

  // Returns false when the connection must be torn down (an error), true at a clean end of stream.
  bool read_loop() {
    std::vector<char> buf(256 * 1024);
    for (;;) {
      const ssize_t n = recv(src_, buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      std::unique_lock lock(mu_);
      if (n <= 0) {
        chunks_.push_back({Clock::now() + delay_, {}});
        cv_.notify_all();
        return n == 0;
      }
      // Back-pressure: the sender slows down once this much waits here (otherwise TCP's own window vanishes).
      cv_.wait(lock, [&] { return stopped_ || buffered_ < max_buffered_; });
      if (stopped_) return false;
      chunks_.push_back({Clock::now() + delay_, std::vector<char>(buf.begin(), buf.begin() + n)});
      buffered_ += static_cast<size_t>(n);
      cv_.notify_all();
    }
  }

  bool write_loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopped_ || !chunks_.empty(); });
      if (stopped_) return false;
      const auto due = chunks_.front().due;
      if (cv_.wait_until(lock, due, [&] { return stopped_; })) return false;
      Chunk c = std::move(chunks_.front());
      chunks_.pop_front();
      if (c.data.empty()) {
        // The source closed its sending side: pass the half-close on, after the same delay.
        lock.unlock();
        shutdown(dst_, SHUT_WR);
        return true;
      }
      buffered_ -= c.data.size();
      cv_.notify_all();
      lock.unlock();
      size_t off = 0;
      while (off < c.data.size()) {
        const ssize_t n = send(dst_, c.data.data() + off, c.data.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        off += static_cast<size_t>(n);
      }
      lock.lock();
    }
  }

  void stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
    cv_.notify_all();
  }

 private:
  struct Chunk {
    Clock::time_point due;
    std::vector<char> data;  // empty: end of stream
  };
  int src_;
  int dst_;
  Clock::duration delay_;
  size_t max_buffered_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> chunks_;
  size_t buffered_ = 0;
  bool stopped_ = false;
};

// A relayed connection: two pipes, four threads. Any error tears down both directions.
class Connection {
 public:
  Connection(Fd client, Fd target, Clock::duration delay, size_t max_buffered)
      : client_(std::move(client)),
        target_(std::move(target)),
        up_(client_.get(), target_.get(), delay, max_buffered),
        down_(target_.get(), client_.get(), delay, max_buffered) {
    threads_.emplace_back([this] { finish(up_.read_loop()); });
    threads_.emplace_back([this] { finish(up_.write_loop()); });
    threads_.emplace_back([this] { finish(down_.read_loop()); });
    threads_.emplace_back([this] { finish(down_.write_loop()); });
  }
  ~Connection() {
    abort();
    for (auto& t : threads_) t.join();
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool done() const { return finished_.load() == 4; }

  // Wakes every thread: sockets shut down (blocked recv/send return), pipes stopped (waits return).
  void abort() {
    shutdown(client_.get(), SHUT_RDWR);
    shutdown(target_.get(), SHUT_RDWR);
    up_.stop();
    down_.stop();
  }

 private:
  void finish(bool clean) {
    if (!clean && !aborting_.exchange(true)) abort();
    // All four threads done (clean half-closes both ways, or an abort): the connection can be joined.
    finished_.fetch_add(1);
  }

  Fd client_;
  Fd target_;
  Pipe up_;
  Pipe down_;
  std::atomic<bool> aborting_{false};
  std::atomic<int> finished_{0};
  std::vector<std::thread> threads_;
};

struct Options {
  std::string listen;
  std::string target;
  double delay_ms = 0;
  double max_buffer_mb = 64;
  bool quiet = false;
};

int run_relay(const Options& o) {
  if (!(o.delay_ms >= 0 && o.delay_ms <= 60000)) {
    throw RelayError(fmt::format("--delay-ms: {} is outside [0, 60000]", o.delay_ms));
  }
  if (!(o.max_buffer_mb >= 1 && o.max_buffer_mb <= 4096)) {
    throw RelayError(fmt::format("--max-buffer-mb: {} is outside [1, 4096]", o.max_buffer_mb));
  }
  const Endpoint listen_at = parse_endpoint("--listen", o.listen);
  const Endpoint target = parse_endpoint("--to", o.target);
  const auto delay = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(o.delay_ms));
  const auto max_buffered = static_cast<size_t>(o.max_buffer_mb * 1024 * 1024);

  // Signals arrive through a signalfd in the accept loop; every thread (created later) inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  Fd sigfd(signalfd(-1, &stop_signals, SFD_CLOEXEC));
  if (sigfd.get() < 0) throw RelayError(fmt::format("signalfd: {}", std::strerror(errno)));

  Fd listener(socket(listen_at.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.get() < 0) throw RelayError(fmt::format("socket: {}", std::strerror(errno)));
  const int one = 1;
  setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&listen_at.addr), listen_at.len) != 0) {
    throw RelayError(fmt::format("--listen {}: cannot bind: {}", o.listen, std::strerror(errno)));
  }
  if (listen(listener.get(), 64) != 0) throw RelayError(fmt::format("listen: {}", std::strerror(errno)));
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len);
  // The line scripts wait for (port 0 picks a free port).
  std::printf("listening on %s\n", endpoint_text(bound).c_str());
  std::fflush(stdout);
  if (!o.quiet) {
    fmt::print(stderr, "tessera-relay: {} -> {}, {} ms each way\n", endpoint_text(bound), o.target, o.delay_ms);
  }

  std::list<std::unique_ptr<Connection>> connections;
  for (;;) {
    pollfd fds[2] = {{listener.get(), POLLIN, 0}, {sigfd.get(), POLLIN, 0}};
    const int rc = poll(fds, 2, 500);
    if (rc < 0 && errno != EINTR) throw RelayError(fmt::format("poll: {}", std::strerror(errno)));
    // Finished connections are joined here, so their threads and sockets do not pile up.
    connections.remove_if([](const auto& c) { return c->done(); });
    if (rc <= 0) continue;
    if (fds[1].revents != 0) break;
    if ((fds[0].revents & POLLIN) == 0) continue;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    Fd client(accept4(listener.get(), reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC));
    if (client.get() < 0) continue;
    Fd upstream(socket(target.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    // A target that drops SYNs must not stall this loop (and SIGTERM) for the kernel's two minutes: Linux bounds
    // connect() by the send timeout, which goes back to none once connected.
    const timeval connect_timeout{5, 0};
    const timeval no_timeout{0, 0};
    setsockopt(upstream.get(), SOL_SOCKET, SO_SNDTIMEO, &connect_timeout, sizeof connect_timeout);
    if (upstream.get() < 0 ||
        connect(upstream.get(), reinterpret_cast<const sockaddr*>(&target.addr), target.len) != 0) {
      // Closing the client at once tells it the target is unreachable, as a direct connect would.
      fmt::print(stderr, "tessera-relay: cannot connect to {}: {}\n", o.target, std::strerror(errno));
      continue;
    }
    setsockopt(upstream.get(), SOL_SOCKET, SO_SNDTIMEO, &no_timeout, sizeof no_timeout);
    set_nodelay(client.get());
    set_nodelay(upstream.get());
    if (!o.quiet) fmt::print(stderr, "tessera-relay: {} connected\n", endpoint_text(peer));
    connections.push_back(std::make_unique<Connection>(std::move(client), std::move(upstream), delay, max_buffered));
  }
  if (!o.quiet) fmt::print(stderr, "tessera-relay: stopping ({} open connections)\n", connections.size());
  connections.clear();  // each destructor aborts its sockets and joins its threads
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera-relay: forward TCP connections to a target, delaying every chunk by a fixed time each way"};
  Options o;
  app.add_option("--listen", o.listen, "HOST:PORT to accept connections on (port 0: any free port)")->required();
  app.add_option("--to", o.target, "HOST:PORT to forward each connection to")->required();
  app.add_option("--delay-ms", o.delay_ms, "One-way delay added in each direction, in milliseconds")->required();
  app.add_option("--max-buffer-mb", o.max_buffer_mb, "Bytes held per direction before the sender is slowed")
      ->capture_default_str();
  app.add_flag("-q,--quiet", o.quiet, "Log only errors");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run_relay(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "tessera-relay: error: {}\n", e.what());
    return 1;
  }
}
