// The HTTP front's bounds with real sockets on loopback: slow and silent clients, oversized heads, a full queue,
// keep-alive and pipelining; and scan_head on its own.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "server/http_front.h"
#include "server/http_head.h"
#include "server/server_impl.h"

namespace tessera::server {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A connected loopback socket that closes itself.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  bool connected() const { return connected_; }
  bool send_all(std::string_view s) { return send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size()); }
  // Everything until the peer closes or `wait` passes.
  std::string read_all(std::chrono::milliseconds wait) {
    std::string out;
    const auto deadline = Clock::now() + wait;
    while (Clock::now() < deadline && read_some(out)) {
    }
    return out;
  }
  // Reads until `count` responses' worth of "HTTP/1.1 " status lines arrived (or `wait` passes).
  std::string read_responses(size_t count, std::chrono::milliseconds wait) {
    std::string out;
    const auto deadline = Clock::now() + wait;
    auto seen = [&] {
      size_t n = 0;
      for (size_t p = out.find("HTTP/1.1 "); p != std::string::npos; p = out.find("HTTP/1.1 ", p + 1)) ++n;
      return n;
    };
    while (Clock::now() < deadline &&
           (seen() < count || out.find("\r\n\r\n", out.rfind("HTTP/1.1 ")) == std::string::npos) && read_some(out)) {
    }
    std::this_thread::sleep_for(20ms);  // the rest of the last body
    pollfd p{fd_, POLLIN, 0};
    while (poll(&p, 1, 0) > 0) {
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0) break;
      out.append(buf, size_t(n));
    }
    return out;
  }

 private:
  // Appends what arrives within 20 ms to `out`; false once the peer has closed.
  bool read_some(std::string& out) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) return true;
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    out.append(buf, size_t(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
};

int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return -1;
  return std::stoi(response.substr(9, 3));
}

// A front over an httplib router with /health, /echo (POST body back) and /slow (holds its thread).
class FrontFixture {
 public:
  explicit FrontFixture(HttpFront::Options options) {
    http_.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
    http_.Post("/echo",
               [](const httplib::Request& req, httplib::Response& res) { res.set_content(req.body, "text/plain"); });
    http_.Get("/slow", [this](const httplib::Request&, httplib::Response& res) {
      while (!release_) std::this_thread::sleep_for(5ms);
      res.set_content("slow", "text/plain");
    });
    front_ = std::make_unique<HttpFront>(
        options,
        [this](httplib::Stream& s, bool close_connection, bool& closed) {
          http_.process_request(s, close_connection, closed, [](httplib::Request&) {});
        },
        [](int status, std::string_view message) {
          return "{\"status\":" + std::to_string(status) + ",\"message\":\"" + std::string(message) + "\"}";
        });
    port_ = front_->bind("127.0.0.1", 0);
    front_->start();
  }
  ~FrontFixture() {
    release_ = true;
    front_->stop();
  }
  int port() const { return port_; }
  HttpFront& front() { return *front_; }
  void release() { release_ = true; }

 private:
  RoutedServer http_;
  std::unique_ptr<HttpFront> front_;
  std::atomic<bool> release_{false};
  int port_ = 0;
};

HttpFront::Options quick_options() {
  HttpFront::Options o;
  o.threads = 4;
  o.limits.request_time = 2000ms;
  o.limits.keep_alive_idle = 2000ms;
  return o;
}

TEST(HeadScan, FindsTheEndOfTheHeadAndTheBodyLength) {
  const HttpLimits limits;
  const std::string head = "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n";
  const HeadScan scan = scan_head(head + "{\"a\":1}", limits);
  ASSERT_EQ(scan.state, HeadScan::State::Complete);
  EXPECT_EQ(scan.head_end, head.size());
  EXPECT_EQ(scan.method, "POST");
  EXPECT_EQ(scan.path, "/v1/chat/completions");
  EXPECT_EQ(scan.content_length, 12u);
  EXPECT_EQ(scan_head(head.substr(0, head.size() - 2), limits).state, HeadScan::State::Incomplete);
  EXPECT_EQ(scan_head("GET / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", limits).chunked, true);
}

TEST(HeadScan, RefusesWhatBreaksABound) {
  HttpLimits limits;
  limits.header_lines = 3;
  limits.head_bytes = 200;
  limits.request_line_bytes = 50;
  EXPECT_EQ(scan_head("GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\n\r\n", limits).state,
            HeadScan::State::TooLarge);
  EXPECT_EQ(scan_head("GET / HTTP/1.1\r\na: " + std::string(300, 'x'), limits).state, HeadScan::State::TooLarge);
  EXPECT_EQ(scan_head("GET /" + std::string(60, 'x'), limits).state, HeadScan::State::UriTooLong);
  EXPECT_EQ(scan_head("GET /" + std::string(60, 'x') + " HTTP/1.1\r\n\r\n", limits).state, HeadScan::State::UriTooLong);
  EXPECT_EQ(scan_head("hello there\r\n\r\n", limits).state, HeadScan::State::Malformed);
  EXPECT_EQ(scan_head("GET / HTTP/1.1\r\nno colon\r\n\r\n", limits).state, HeadScan::State::Malformed);
  EXPECT_EQ(scan_head("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", limits).state,
            HeadScan::State::Malformed);
  EXPECT_EQ(scan_head("POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", limits).state, HeadScan::State::Malformed);
}

TEST(HttpFront, HealthAnswersWithinASecondWhile200ClientsTrickle) {
  HttpFront::Options o = quick_options();
  o.limits.request_time = 30000ms;  // the tricklers stay for the whole test
  FrontFixture f(o);
  std::vector<std::unique_ptr<RawClient>> tricklers;
  for (int i = 0; i < 200; ++i) {
    tricklers.push_back(std::make_unique<RawClient>(f.port()));
    ASSERT_TRUE(tricklers.back()->connected());
    tricklers.back()->send_all("POST /echo HTTP/1.1\r\n");
  }
  for (int round = 0; round < 3; ++round) {
    for (auto& t : tricklers) t->send_all("X-A: b\r\n");
    const auto start = Clock::now();
    httplib::Client client("127.0.0.1", f.port());
    client.set_read_timeout(5, 0);
    auto health = client.Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
    EXPECT_EQ(health->body, "ok");
    auto echo = client.Post("/echo", "hello", "text/plain");
    ASSERT_TRUE(echo);
    EXPECT_EQ(echo->body, "hello");
    EXPECT_LT(Clock::now() - start, 1s) << "round " << round;
  }
}

TEST(HttpFront, ARequestThatDoesNotArriveInTimeGets408) {
  HttpFront::Options o = quick_options();
  o.limits.request_time = 300ms;
  FrontFixture f(o);
  RawClient c(f.port());
  c.send_all("POST /echo HTTP/1.1\r\nContent-Length: 5\r\n\r\nab");
  const auto start = Clock::now();
  const std::string r = c.read_all(3000ms);
  EXPECT_EQ(status_of(r), 408) << r;
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(f.front().timed_out(), 1u);
}

TEST(HttpFront, OversizedHeadsAreRefusedWithTheirStatus) {
  FrontFixture f(quick_options());
  std::string many = "GET /health HTTP/1.1\r\n";
  for (int i = 0; i < 101; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  const std::vector<std::pair<std::string, int>> cases = {
      {many + "\r\n", 431},
      {"GET /health HTTP/1.1\r\nX-Big: " + std::string(40000, 'a') + "\r\n\r\n", 431},
      {"GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n", 414},
      {"NOT HTTP\r\n\r\n", 400},
  };
  for (const auto& [request, status] : cases) {
    RawClient c(f.port());
    c.send_all(request);
    const std::string r = c.read_all(2000ms);
    EXPECT_EQ(status_of(r), status) << r.substr(0, 80);
    EXPECT_NE(r.find("\"message\""), std::string::npos);
  }
}

TEST(HttpFront, AFullQueueAnswers503WithRetryAfter) {
  HttpFront::Options o = quick_options();
  o.threads = 1;
  o.limits.queued_requests = 1;
  o.retry_after_seconds = 7;
  FrontFixture f(o);
  RawClient busy(f.port()), queued(f.port()), refused(f.port());
  busy.send_all("GET /slow HTTP/1.1\r\n\r\n");
  std::this_thread::sleep_for(200ms);
  queued.send_all("GET /slow HTTP/1.1\r\n\r\n");
  std::this_thread::sleep_for(200ms);
  refused.send_all("GET /slow HTTP/1.1\r\n\r\n");
  const std::string r = refused.read_all(2000ms);
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_NE(r.find("Retry-After: 7"), std::string::npos);
  f.release();
  EXPECT_EQ(status_of(busy.read_responses(1, 3000ms)), 200);
  EXPECT_EQ(status_of(queued.read_responses(1, 3000ms)), 200);
}

TEST(HttpFront, KeepsConnectionsAliveAndAnswersPipelinedRequestsInOrder) {
  FrontFixture f(quick_options());
  RawClient c(f.port());
  c.send_all(
      "POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\none"
      "POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\ntwo");
  std::string r = c.read_responses(2, 3000ms);
  ASSERT_NE(r.find("one"), std::string::npos) << r;
  ASSERT_NE(r.find("two"), std::string::npos) << r;
  EXPECT_LT(r.find("one"), r.find("two"));
  // The same connection, a third request with its body in pieces.
  c.send_all("POST /echo HTTP/1.1\r\nContent-Length: 6\r\n\r\nthr");
  std::this_thread::sleep_for(100ms);
  c.send_all("ee!");
  r = c.read_responses(1, 3000ms);
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_NE(r.find("three!"), std::string::npos);
}

TEST(HttpFront, SilentConnectionsBeyondTheBoundAreRefusedNotQueued) {
  HttpFront::Options o = quick_options();
  o.limits.waiting_connections = 10;
  FrontFixture f(o);
  std::vector<std::unique_ptr<RawClient>> silent;
  for (int i = 0; i < 30; ++i) silent.push_back(std::make_unique<RawClient>(f.port()));
  const auto deadline = Clock::now() + 3s;
  while (f.front().refused() < 20 && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(f.front().refused(), 20u);
  silent.clear();  // their slots free up once the loop sees them close
  std::this_thread::sleep_for(200ms);
  httplib::Client client("127.0.0.1", f.port());
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

}  // namespace
}  // namespace tessera::server
