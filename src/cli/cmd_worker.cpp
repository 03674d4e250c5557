// `tessera worker`: a daemon that holds one pipeline stage for a head; stops on SIGINT/SIGTERM.
#include <csignal>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cluster/stage_group.h"
#include "cluster/worker.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

struct WorkerArgs {
  std::string listen = "127.0.0.1:50052";
  std::string name;
  std::string key_file;
  std::string models;
  std::string cache;
  uint64_t mem_limit = 0;
  double idle_timeout = 0;
  int threads = 0;
  bool repack = false;
  bool mmap = false;
  bool pin = false;
};

// The stop flag a signal handler may touch must be a lock-free atomic with static storage.
std::atomic<bool>& stop_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

extern "C" void on_stop_signal(int) { stop_flag().store(true); }

// A member of a head's group: the same load and follower loop as an MPI rank, over the group's links, with the
// head's options for what decides the arithmetic and this worker's for its own machine (threads unless the head
// gave -t, --repack, --mmap, --pin).
void follow_group(const cluster::GroupTask& t) {
  // A pipeline stage held by a group (--place): its share of that stage's layers, following the stage's leader.
  if (t.join.layer_end > 0) return cluster::follow_stage_group(t);
  const int n = static_cast<int>(t.join.members.size());
  ModelOptions o;
  o.model = t.source ? t.join.file_name : t.model.string();
  o.threads = t.join.threads > 0 ? t.join.threads : t.worker.threads;
  o.n_ctx = t.join.n_ctx;
  o.kv_type = t.join.kv_type == GgmlType::F32 ? "f32" : "f16";
  o.repack = t.worker.repack;
  o.mmap = !t.worker.copy_weights;
  o.pin = t.worker.pin;
  o.exact_gelu = t.join.exact_gelu;
  o.tp = t.join.tp ? n : 1;
  o.ep = t.join.ep ? n : 1;
  o.tp_shares = t.join.shares;
  o.ep_redundancy = t.join.ep_redundancy;
  o.collective_timeout = t.join.timeout_s;
  o.profile_ranks = t.join.profile;
  load_model(o, t.join.n_slots, true, t.comm, t.source);
}

}  // namespace

Command add_worker_command(CLI::App& root) {
  auto a = std::make_shared<WorkerArgs>();
  CLI::App* app = root.add_subcommand(
      "worker", "Serve pipeline stages, or a share of every layer (--tp/--ep), to a head (one head at a time)");
  app->add_option("--listen", a->listen, "host:port to listen on (loopback unless a key is given)")
      ->capture_default_str();
  app->add_option("--name", a->name, "This node's name in messages (default: the listen address)");
  app->add_option("--key-file", a->key_file, "The cluster key (tessera keygen); required off loopback");
  app->add_option("--models", a->models, "Folder of GGUF files: weights found here are mapped, not sent");
  app->add_option("--cache", a->cache, "Folder where received weights are kept, so the next start sends nothing");
  app->add_option(
      "--mem-limit", a->mem_limit,
      "Refuse stages needing more bytes than this: weights (and their packed copy with --repack), KV cache and "
      "buffers (0: no limit)");
  app->add_option("--idle-timeout", a->idle_timeout,
                  "Seconds a head may send nothing (heartbeats aside) before its session ends and another head may "
                  "connect (0: never)")
      ->check(CLI::Range(0.0, 1e7));
  app->add_option("-t,--threads", a->threads, "Threads (default: all cores)")->check(CLI::Range(0, 1024));
  add_repack_option(*app, a->repack);
  add_mmap_option(*app, a->mmap);
  add_pin_option(*app, a->pin);
  return {app, [a] {
            cluster::WorkerOptions o;
            o.listen = a->listen;
            o.name = a->name;
            if (!a->key_file.empty()) o.key = net::load_cluster_key(a->key_file);
            if (!a->models.empty()) o.weights.models_dir = a->models;
            if (!a->cache.empty()) o.weights.cache_dir = a->cache;
            o.mem_limit = a->mem_limit;
            o.idle_timeout = std::chrono::milliseconds(static_cast<int64_t>(a->idle_timeout * 1000));
            o.threads = a->threads;
            o.repack = a->repack;
            o.copy_weights = !a->mmap;
            o.pin = a->pin;
            o.follow_group = follow_group;
            cluster::Worker worker(o);
            std::signal(SIGINT, on_stop_signal);
            std::signal(SIGTERM, on_stop_signal);
            // The line tests and scripts wait for: the real endpoint (port 0 picks a free one).
            std::fprintf(stdout, "listening on %s\n", worker.endpoint().c_str());
            std::fflush(stdout);
            log_info("worker {}: listening on {} ({})", worker.name(), worker.endpoint(),
                     o.key ? "TLS with the cluster key" : "plain TCP, loopback only");
            worker.serve(stop_flag());
            return 0;
          }};
}

}  // namespace tessera
