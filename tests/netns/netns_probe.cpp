// netns_probe: measures a test cluster's link on its own (RTT of 1-byte pings, bandwidth of timed bulk transfers),
// so the harness can check its shaping independently of what tessera's head reports.
//   netns_probe serve --listen HOST:PORT      prints "listening on HOST:PORT", serves until SIGTERM
//   netns_probe measure --to HOST:PORT [--bytes N] [--pings K]
//                                             prints "rtt_ms=R up_gbit=U down_gbit=D"
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct ProbeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

sockaddr_in parse_ipv4(const std::string& text) {
  const size_t colon = text.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (colon == std::string::npos || inet_pton(AF_INET, text.substr(0, colon).c_str(), &a.sin_addr) != 1) {
    throw ProbeError(fmt::format("'{}' is not IPV4:PORT", text));
  }
  const int port = std::stoi(text.substr(colon + 1));
  if (port < 0 || port > 65535) throw ProbeError(fmt::format("'{}': port out of range", text));
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

void send_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) throw ProbeError(fmt::format("send: {}", std::strerror(errno)));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

// Returns false on a clean end of stream before the first byte.
bool recv_all(int fd, void* data, size_t n) {
  auto* p = static_cast<char*>(data);
  const size_t total = n;
  while (n > 0) {
    const ssize_t k = recv(fd, p, n, 0);
    if (k == 0 && n == total) return false;
    if (k <= 0) throw ProbeError(fmt::format("recv: {}", k == 0 ? "connection closed" : std::strerror(errno)));
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// A request is one command byte and a 64-bit count: 'p' (ping, answered with one byte), 'u' (the client sends
// count bytes, answered with one byte), 'd' (the server sends count bytes).
void serve_one(int fd) {
  std::vector<char> buf(1 << 20, 'x');
  for (;;) {
    char op = 0;
    uint64_t count = 0;
    if (!recv_all(fd, &op, 1)) return;
    recv_all(fd, &count, sizeof count);
    if (op == 'u') {
      for (uint64_t left = count; left > 0;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
        recv_all(fd, buf.data(), n);
        left -= n;
      }
    } else if (op == 'd') {
      for (uint64_t left = count; left > 0;) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
        send_all(fd, buf.data(), n);
        left -= n;
      }
      continue;
    } else if (op != 'p') {
      throw ProbeError(fmt::format("unknown request '{}'", op));
    }
    send_all(fd, "k", 1);
  }
}

int serve(const std::string& listen_at) {
  const sockaddr_in a = parse_ipv4(listen_at);
  Fd l(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  setsockopt(l.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(l.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || listen(l.get(), 16) != 0) {
    throw ProbeError(fmt::format("cannot listen on {}: {}", listen_at, std::strerror(errno)));
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  getsockname(l.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  char host[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &bound.sin_addr, host, sizeof host);
  std::printf("listening on %s:%d\n", host, ntohs(bound.sin_port));
  std::fflush(stdout);
  // Killed by SIGTERM from the harness; one connection at a time is all a measurement needs.
  for (;;) {
    Fd c(accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (c.get() < 0) continue;
    setsockopt(c.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    try {
      serve_one(c.get());
    } catch (const ProbeError& e) {
      fmt::print(stderr, "netns_probe serve: {}\n", e.what());
    }
  }
}

double timed(int fd, char op, uint64_t count) {
  std::vector<char> buf(1 << 20, 'y');
  const auto start = Clock::now();
  send_all(fd, &op, 1);
  send_all(fd, &count, sizeof count);
  if (op == 'u') {
    for (uint64_t left = count; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      send_all(fd, buf.data(), n);
      left -= n;
    }
  }
  if (op == 'd') {
    for (uint64_t left = count; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      recv_all(fd, buf.data(), n);
      left -= n;
    }
  } else {
    char k = 0;
    recv_all(fd, &k, 1);
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

int measure(const std::string& to, uint64_t bytes, int pings) {
  const sockaddr_in a = parse_ipv4(to);
  Fd c(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (connect(c.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    throw ProbeError(fmt::format("cannot connect to {}: {}", to, std::strerror(errno)));
  }
  const int one = 1;
  setsockopt(c.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timed(c.get(), 'p', 0);  // warm-up
  std::vector<double> rtts;
  for (int i = 0; i < pings; ++i) rtts.push_back(timed(c.get(), 'p', 0));
  std::sort(rtts.begin(), rtts.end());
  const double rtt = rtts[rtts.size() / 2];
  // A first transfer grows TCP's window, as a long-lived link would have; then time one each way.
  timed(c.get(), 'u', bytes / 4);
  const double up = timed(c.get(), 'u', bytes);
  timed(c.get(), 'd', bytes / 4);
  const double down = timed(c.get(), 'd', bytes);
  const auto gbit = [&](double s) { return static_cast<double>(bytes) * 8 / std::max(s - rtt, s * 0.1) / 1e9; };
  std::printf("rtt_ms=%.3f up_gbit=%.3f down_gbit=%.3f\n", rtt * 1e3, gbit(up), gbit(down));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"netns_probe: measure a test link's RTT and bandwidth"};
  app.require_subcommand(1);
  std::string listen_at, to;
  uint64_t bytes = 16u << 20;
  int pings = 9;
  CLI::App* s = app.add_subcommand("serve", "Answer pings and transfers");
  s->add_option("--listen", listen_at, "IPV4:PORT")->required();
  CLI::App* m = app.add_subcommand("measure", "Measure the link to a server");
  m->add_option("--to", to, "IPV4:PORT")->required();
  m->add_option("--bytes", bytes, "Bytes timed each way")->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  m->add_option("--pings", pings, "Pings (the median is reported)")->check(CLI::Range(1, 1000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return s->parsed() ? serve(listen_at) : measure(to, bytes, pings);
  } catch (const std::exception& e) {
    fmt::print(stderr, "netns_probe: error: {}\n", e.what());
    return 1;
  }
}
