// LinkCommunicator over real TLS links on loopback, its members as threads: every collective's result, the same
// bits on every member for the direct and the ring all-reduce, the f16 wire within its rounding, stats, and a
// deadline that names the member that stays silent.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "cluster/link_communicator.h"
#include "net/keys.h"
#include "util/error.h"

namespace tessera::cluster {
namespace {

using namespace std::chrono_literals;

// n members linked pairwise over TLS with one key: links[i][j] is i's end of the link to j.
struct Mesh {
  explicit Mesh(int n) : key(net::ClusterKey::generate()) {
    links.assign(static_cast<size_t>(n), std::vector<std::shared_ptr<net::Connection>>(static_cast<size_t>(n)));
    for (int i = 0; i < n; ++i) listeners.push_back(std::make_unique<net::Listener>("127.0.0.1:0", &key));
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) {
        std::unique_ptr<net::Connection> accepted;
        std::thread t([&] { accepted = listeners[static_cast<size_t>(i)]->accept(10s); });
        links[static_cast<size_t>(j)][static_cast<size_t>(i)] =
            net::connect(listeners[static_cast<size_t>(i)]->endpoint(), &key, 10s);
        t.join();
        links[static_cast<size_t>(i)][static_cast<size_t>(j)] = std::move(accepted);
      }
    }
  }
  std::unique_ptr<LinkCommunicator> member(int r, LinkOptions o) {
    std::vector<LinkMember> m;
    for (size_t q = 0; q < links.size(); ++q) {
      m.push_back({fmt::format("m{}", q), listeners[q]->endpoint(), links[static_cast<size_t>(r)][q]});
    }
    return std::make_unique<LinkCommunicator>(r, std::move(m), o);
  }
  net::ClusterKey key;
  std::vector<std::unique_ptr<net::Listener>> listeners;
  std::vector<std::vector<std::shared_ptr<net::Connection>>> links;
};

// Runs body(rank, communicator) on a thread per member; rethrows nothing (bodies record their own outcome).
void run_group(Mesh& mesh, LinkOptions o, const std::function<void(int, LinkCommunicator&)>& body) {
  const int n = static_cast<int>(mesh.links.size());
  std::vector<std::unique_ptr<LinkCommunicator>> comms;
  for (int r = 0; r < n; ++r) comms.push_back(mesh.member(r, o));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { body(r, *comms[static_cast<size_t>(r)]); });
  for (auto& t : threads) t.join();
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Every member's all-reduce of random buffers: identical bits everywhere, within `tolerance` of the exact sum.
void check_all_reduce(int n, size_t count, net::WireType wire, float tolerance) {
  Mesh mesh(n);
  LinkOptions o;
  o.wire = wire;
  std::vector<std::vector<float>> results(static_cast<size_t>(n));
  std::vector<std::string> errors(static_cast<size_t>(n));
  run_group(mesh, o, [&](int r, LinkCommunicator& c) {
    try {
      auto v = random_values(count, static_cast<uint32_t>(r + 1));
      c.all_reduce_sum(v);
      results[static_cast<size_t>(r)] = std::move(v);
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  });
  for (int r = 0; r < n; ++r) ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  double worst = 0;
  for (size_t i = 0; i < count; ++i) {
    double exact = 0;
    for (int r = 0; r < n; ++r) exact += random_values(count, static_cast<uint32_t>(r + 1))[i];
    worst = std::max(worst, std::abs(exact - results[0][i]));
    if (i > 64) break;  // the reference regenerates buffers: a sample of positions is enough
  }
  EXPECT_LE(worst, tolerance);
  for (int r = 1; r < n; ++r) {
    ASSERT_EQ(results[static_cast<size_t>(r)].size(), count);
    EXPECT_EQ(std::memcmp(results[0].data(), results[static_cast<size_t>(r)].data(), count * sizeof(float)), 0)
        << "rank " << r << " differs from rank 0";
  }
}

TEST(LinkCommunicator, DirectAllReduceSameBitsEverywhere) {
  check_all_reduce(2, 300, net::WireType::F32, 1e-5f);
  check_all_reduce(3, 1000, net::WireType::F32, 1e-5f);
}

TEST(LinkCommunicator, RingAllReduceSameBitsEverywhere) {
  check_all_reduce(2, 100001, net::WireType::F32, 1e-5f);  // 400 KB: over the direct limit
  check_all_reduce(3, 300007, net::WireType::F32, 1e-5f);  // uneven chunks
}

TEST(LinkCommunicator, HalfWireWithinRounding) {
  // Three partial sums of |x| <= 2, each hop rounded to f16 (11 bits): well within 0.01.
  check_all_reduce(3, 1000, net::WireType::F16, 1e-2f);
  check_all_reduce(3, 100000, net::WireType::F16, 1e-2f);
}

TEST(LinkCommunicator, BroadcastGatherAllGatherAndStats) {
  const int n = 3;
  Mesh mesh(n);
  std::vector<std::string> errors(n);
  run_group(mesh, {}, [&](int r, LinkCommunicator& c) {
    try {
      std::vector<uint8_t> b;
      if (r == 1) b = {1, 2, 3, 4, 5};
      c.broadcast(b, 1);
      if (b != std::vector<uint8_t>{1, 2, 3, 4, 5}) throw Error("broadcast");
      const std::vector<float> mine(static_cast<size_t>(r + 1), static_cast<float>(r));
      std::vector<float> all;
      c.gather(mine, all, 0);
      if (r == 0 && all != std::vector<float>{0, 1, 1, 2, 2, 2}) throw Error("gather");
      if (r != 0 && !all.empty()) throw Error("gather on a non-root");
      for (size_t bytes : {size_t{8}, size_t{40000}}) {  // direct, then through rank 0
        std::vector<uint8_t> m(bytes, static_cast<uint8_t>(r + 7)), everyone;
        c.all_gather(m, everyone);
        if (everyone.size() != bytes * n) throw Error("all-gather size");
        for (int q = 0; q < n; ++q) {
          if (everyone[static_cast<size_t>(q) * bytes] != q + 7 || everyone[(q + 1) * bytes - 1] != q + 7) {
            throw Error("all-gather contents");
          }
        }
      }
      std::vector<uint8_t> msg;
      if (r == 0) c.send(std::vector<uint8_t>{9, 9}, 2);
      if (r == 2) {
        c.recv(msg, 0);
        if (msg != std::vector<uint8_t>{9, 9}) throw Error("send/recv");
      }
      const auto st = c.stats();
      // A broadcast, a gather, two all-gathers, and rank 0's send (a receive is not counted, as under MPI).
      if (st.calls != (r == 0 ? 5u : 4u)) throw Error(fmt::format("calls {}", st.calls));
      if (r == 1 && st.bytes < 10) throw Error("the broadcast's bytes are not counted");
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

TEST(LinkCommunicator, DeadlineNamesTheSilentMember) {
  const int n = 3;
  Mesh mesh(n);
  LinkOptions o;
  o.timeout = 1000ms;
  std::vector<std::string> errors(n);
  std::vector<double> seconds(n);
  run_group(mesh, o, [&](int r, LinkCommunicator& c) {
    if (r == 2) {  // alive (its heartbeats go on) but never in the collective
      std::this_thread::sleep_for(2500ms);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      std::vector<float> v(16, 1.0f);
      c.all_reduce_sum(v);
    } catch (const Error& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
    seconds[static_cast<size_t>(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // After a failure the communicator refuses at once, with the same reason.
    try {
      std::vector<float> v(4, 1.0f);
      c.all_reduce_sum(v);
      errors[static_cast<size_t>(r)] += " | a second all-reduce went through";
    } catch (const Error& e) {
      if (std::string(e.what()).find("failed earlier") == std::string::npos) errors[static_cast<size_t>(r)] += " | ?";
    }
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("rank 2: m2 (" + mesh.listeners[2]->endpoint() + ")"),
              std::string::npos)
        << "rank " << r << ": " << errors[static_cast<size_t>(r)];
    EXPECT_EQ(errors[static_cast<size_t>(r)].find(" | "), std::string::npos) << errors[static_cast<size_t>(r)];
    EXPECT_LT(seconds[static_cast<size_t>(r)], 4.0) << "rank " << r;
  }
}

}  // namespace
}  // namespace tessera::cluster
