// ServeProcess and RawClient: fork/exec with a pipe for standard error, and a blocking socket with poll timeouts.
#include "server/serve_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <stdexcept>

#include "support/test_paths.h"

namespace tessera::test {

using Clock = std::chrono::steady_clock;

ServeProcess::ServeProcess(std::vector<std::string> args, Env env) {
  // A test that writes to a server that just closed must see an error, not die.
  signal(SIGPIPE, SIG_IGN);
  args.insert(args.begin(), {tessera_bin().string(), "serve", "--port", "0"});
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    dup2(err_pipe[1], 2);
    const int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(devnull, 1);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(err_pipe[1]);
  err_fd_ = err_pipe[0];
  const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  std::smatch m;
  while (Clock::now() < deadline) {
    drain(std::chrono::milliseconds(50));
    if (std::regex_search(log_, m, listening)) {
      port_ = std::stoi(m[1]);
      break;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid_ = -1;
      throw std::runtime_error("tessera serve exited: " + log_);
    }
  }
  if (port_ == 0) throw std::runtime_error("tessera serve did not start listening: " + log_);
  while (Clock::now() < deadline) {
    drain(std::chrono::milliseconds(20));
    if (log_.find("tessera serve: ready") != std::string::npos) return;
  }
  throw std::runtime_error("tessera serve did not become ready: " + log_);
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0) stop();
  if (err_fd_ >= 0) ::close(err_fd_);
}

void ServeProcess::drain(std::chrono::milliseconds wait) const {
  pollfd p{err_fd_, POLLIN, 0};
  int timeout = static_cast<int>(wait.count());
  char buf[4096];
  while (poll(&p, 1, timeout) > 0) {
    const ssize_t n = read(err_fd_, buf, sizeof buf);
    if (n <= 0) break;
    log_.append(buf, static_cast<size_t>(n));
    timeout = 0;
  }
}

std::string ServeProcess::log() const {
  drain(std::chrono::milliseconds(0));
  return log_;
}

int ServeProcess::stop() {
  if (pid_ <= 0) return exit_code_;
  kill(pid_, SIGTERM);
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    drain(std::chrono::milliseconds(20));
  }
  drain(std::chrono::milliseconds(0));
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  pid_ = -1;
  return exit_code_;
}

uint64_t ServeProcess::rss_bytes() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

RawClient::RawClient(int port) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) throw std::runtime_error("connect failed");
}

RawClient::~RawClient() { close(); }

void RawClient::send(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error("send failed");
    done += static_cast<size_t>(n);
  }
}

const std::string& RawClient::read_until(const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  char buf[4096];
  while (received_.find(needle) == std::string::npos && Clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0))) <= 0) break;
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) break;
    received_.append(buf, static_cast<size_t>(n));
  }
  return received_;
}

void RawClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string http_post(const std::string& path, const std::string& body, const std::string& extra_headers) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace tessera::test
