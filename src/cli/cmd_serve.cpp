// `tessera serve`: the OpenAI-compatible HTTP server. Binds first (health says "loading"), builds the replicas,
// then serves until SIGINT or SIGTERM, which stop it cleanly (running requests are cancelled).
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/plan_choice.h"
#include "cli/serve_replicas.h"
#include "cluster/stage_recovery.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_split.h"
#include "plan/plan_cli.h"
#include "server/http_server.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

struct ServeArgs {
  ModelOptions model;
  ClusterOptions cluster;
  SamplerParams sampler;
  server::ServerOptions server;
  std::string alias;
  std::string chat_template;
  std::string api_key_file;
  int64_t parallel = 4;
  int replicas = 1;
  int64_t queue = 64;
  int64_t prefill_chunk = 128;
  int http_threads = 0;
  double request_timeout_s = 10;
  bool no_plan = false;
};

// Signals are taken synchronously by the main thread (sigwait): they are blocked before any thread starts, so
// every thread inherits the mask. A write to a client that left must be an error, not a process-ending SIGPIPE.
class SignalWaiter {
 public:
  SignalWaiter() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    signal(SIGPIPE, SIG_IGN);
  }
  ~SignalWaiter() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  int wait() {
    int sig = 0;
    sigwait(&set_, &sig);
    return sig;
  }
  // Takes the signals already sent (a rank that followed rank 0 to its end got mpirun's SIGTERM too): they must not
  // end the process when the mask is restored.
  void drain() {
    const timespec now{0, 0};
    while (sigtimedwait(&set_, nullptr, &now) > 0) {
    }
  }

 private:
  sigset_t set_{};
  sigset_t old_{};
};

std::string read_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot read the API key file", path);
  std::string key;
  std::getline(in, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) fail("{}: the API key file is empty", path);
  return key;
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The file's stem; for a split set, the set's name (NAME for NAME-00001-of-00003.gguf).
std::string model_id(const std::filesystem::path& path, const gguf::GgufFile& file) {
  const std::string name = path.filename().string();
  const std::string suffix = gguf::split_suffix(0, file.n_parts());
  if (file.n_parts() > 1 && name.size() > suffix.size() && name.ends_with(suffix)) {
    return name.substr(0, name.size() - suffix.size());
  }
  return path.stem().string();
}

server::ServedModel describe_model(const ServeArgs& a) {
  const auto file = gguf::GgufFile::open(a.model.model);
  server::ServedModel m;
  m.config = ModelConfig::from_gguf(file);
  try {
    m.tokenizer = Tokenizer::from_metadata(file.metadata());
  } catch (const Error& e) {
    fail("{}: {}", a.model.model, e.what());
  }
  m.id = a.alias.empty() ? model_id(a.model.model, file) : a.alias;
  m.n_ctx = a.model.n_ctx > 0 ? a.model.n_ctx : std::min<int64_t>(m.config.n_ctx_train, 4096);
  const auto jinja = file.metadata().opt_string("tokenizer.chat_template");
  const Tokenizer& tok = *m.tokenizer;
  // Chat requests still need some format without a template; llama.cpp's server falls back to ChatML as well.
  m.chat_format = ChatFormat::resolve(
      a.chat_template.empty() ? std::nullopt : std::optional<std::string_view>(a.chat_template),
      jinja ? std::optional<std::string_view>(*jinja) : std::nullopt, tok.bos() >= 0 ? tok.token_text(tok.bos()) : "",
      tok.eos() >= 0 ? tok.token_text(tok.eos()) : "", true);
  struct stat st {};
  if (stat(a.model.model.c_str(), &st) == 0) m.created = static_cast<int64_t>(st.st_mtime);
  return m;
}

// The plan of one replica over `workers`: its sequences decoding together, on the server's context.
plan::CliPlanRequest plan_request(const ServeArgs& a, const std::string& workers) {
  plan::CliPlanRequest r;
  r.model_path = a.model.model.empty() ? default_model_path() : a.model.model;
  r.workers = workers;
  r.split = a.cluster.split;
  r.place = a.cluster.place;
  r.key_file = a.cluster.key_file;
  r.wire_type = a.cluster.wire_type;
  r.threads = a.model.threads;
  r.concurrency = a.parallel;
  r.n_ctx = a.model.n_ctx;
  r.n_batch = a.model.n_batch;
  r.micro_batch = a.cluster.micro_batch;
  r.kv_type = a.model.kv_type;
  r.repack = a.model.repack;
  return r;
}

int run_serve(ServeArgs a) {
  a.sampler.validate();
  // One replica over --workers without a layout: the planner's choice runs (plan_choice.h).
  const bool follow = !a.no_plan && a.replicas == 1 && plan_may_choose(a.model, a.cluster);
  if (follow) std::fputs(follow_plan(plan_request(a, a.cluster.workers), a.model, a.cluster).c_str(), stderr);
  use_workers_as_ranks(a.model, a.cluster);  // --workers with --tp/--ep: one group, not pipelines
  // Checked before anything binds or loads, so a mistyped worker list fails at once.
  const std::vector<std::string> groups = group_workers(a.cluster.workers, a.replicas);
  if (!a.cluster.split.empty() && a.replicas > 1) {
    fail("--split applies to one pipeline; with --replicas {} each replica splits its own workers evenly", a.replicas);
  }
  for (const auto& g : groups) {
    if (g.empty() || a.no_plan || follow) continue;
    std::fputs(plan::plan_for_cli(plan_request(a, g)).c_str(), stderr);
  }
  if (!a.api_key_file.empty()) a.server.api_key = read_key_file(a.api_key_file);
  if (!is_loopback(a.server.host) && a.server.api_key.empty()) {
    log_warn("listening on {} without --api-key: anyone who can reach this address can use the model", a.server.host);
  }
  a.server.sampler = a.sampler;
  a.server.http_limits.request_time = std::chrono::milliseconds(static_cast<int64_t>(a.request_timeout_s * 1000));
  // A thread per running or queued stream, plus room for metrics and the page. They all start at once, so the
  // default is capped; more complete requests than threads queue (64), then get 503.
  a.server.http_threads = a.http_threads > 0
                              ? a.http_threads
                              : static_cast<int>(std::min<int64_t>(a.replicas * (a.parallel + a.queue) + 16, 1024));

  SignalWaiter signals;
  server::Server srv(a.server, describe_model(a));
  // Under --tp/--ep the ranks load together before anything listens: the ranks other than 0 then follow rank 0's
  // executor until it stops, and only rank 0 serves HTTP.
  std::optional<server::ReplicaSpec> parallel_replica;
  if (a.model.parallel_ranks()) {
    if (!groups.empty() && (groups.size() > 1 || !groups.front().empty())) {
      fail("serve --tp/--ep runs one replica on the ranks mpirun starts (no --workers, no --replicas)");
    }
    ModelOptions o = a.model;
    o.n_ctx = srv.model().n_ctx;
    o.profile_ranks = !a.no_plan && !follow;
    LoadedModel m = load_model(o, a.parallel);
    if (m.follower_done) {
      signals.drain();
      return 0;
    }
    if (!a.no_plan && !follow && m.parallel) {  // --tp/--ep, and pipelines of rank groups (--pp)
      plan::CliPlanRequest r;
      r.model_path = o.model.empty() ? default_model_path() : o.model;
      r.parallel = m.parallel;
      r.threads = o.threads;
      r.concurrency = a.parallel;
      r.n_ctx = o.n_ctx;
      r.n_batch = o.n_batch;
      r.kv_type = o.kv_type;
      r.repack = o.repack;
      std::fputs(plan::plan_for_cli(r).c_str(), stderr);
    }
    parallel_replica.emplace();
    parallel_replica->nodes.push_back(server::local_node_info(*m.weights, *m.executor));
    parallel_replica->executor = std::move(m.executor);
  }
  const int port = srv.start();
  log_info("tessera serve: listening on http://{}:{} (model {}, {} replica(s) x {} parallel)", a.server.host, port,
           srv.model().id, a.replicas, a.parallel);

  SchedulerOptions so;
  so.n_parallel = a.parallel;
  so.max_queue = a.queue;
  so.max_batch_tokens = a.model.n_batch;
  so.prefill_chunk = a.prefill_chunk;
  ModelOptions per_replica = a.model;
  if (per_replica.threads <= 0)
    per_replica.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // Local replicas share the machine's cores instead of each taking them all.
  const auto n_local = std::count(groups.begin(), groups.end(), std::string());
  if (n_local > 0) per_replica.threads = std::max(1, per_replica.threads / static_cast<int>(n_local));
  per_replica.n_ctx = srv.model().n_ctx;
  a.cluster.pool = std::make_shared<cluster::WorkerPool>();  // the replicas draw from the same spares
  for (size_t r = 0; r < groups.size(); ++r) {
    try {
      if (parallel_replica) {
        srv.add_replica(std::move(*parallel_replica), so);
      } else if (groups[r].empty()) {
        srv.add_replica(local_replica(per_replica, a.parallel), so);
      } else {
        ClusterOptions co = a.cluster;
        co.workers = groups[r];
        log_info("tessera serve: replica {}: a pipeline over {}", r, co.workers);
        srv.add_replica(pipeline_replica(per_replica, co, a.parallel), so);
      }
    } catch (const Error& e) {
      srv.set_failed(e.what());
      throw;
    }
  }
  srv.set_ready();
  log_info("tessera serve: ready ({} threads per replica, context {} per sequence, chat template {})",
           per_replica.threads, srv.model().n_ctx, srv.model().chat_format.description());
  const int sig = signals.wait();
  log_info("tessera serve: {} received, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
  srv.stop();
  return 0;
}

}  // namespace

Command add_serve_command(CLI::App& root) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* app = root.add_subcommand("serve", "OpenAI-compatible HTTP server with streaming, metrics and a web page");
  add_model_options(*app, a->model);
  add_sampler_options(*app, a->sampler);
  add_cluster_options(*app, a->cluster);
  app->add_flag("--no-plan", a->no_plan,
                "With --workers or --tp/--ep: do not print the plan (of each replica) at start");
  app->add_option("--host", a->server.host, "Address to listen on")->capture_default_str();
  app->add_option("--port", a->server.port, "Port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  auto* key = app->add_option("--api-key", a->server.api_key, "Require 'Authorization: Bearer KEY' on /v1/*");
  app->add_option("--api-key-file", a->api_key_file, "Read the API key from the first line of this file")
      ->excludes(key);
  app->add_option("--allowed-origin", a->server.allowed_origins,
                  "Let web pages from this origin (https://app.example.com, or * for any) call the API from a browser; "
                  "the server's own page needs none")
      ->take_all();
  app->add_option("--parallel", a->parallel, "Sequences decoded together per replica (continuous batching)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}))
      ->capture_default_str();
  app->add_option("--replicas", a->replicas, "Complete copies of the model behind the one endpoint")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app->add_option("--queue", a->queue, "Requests waiting per replica before 503 (with Retry-After)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000}))
      ->capture_default_str();
  app->add_option("--prefill-chunk", a->prefill_chunk, "Prompt tokens per step while other sequences decode")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app->add_option("-n,--n-predict", a->server.max_tokens,
                  "Default max_tokens (-1: until end of text or a full context)")
      ->capture_default_str();
  app->add_option("--alias,-a", a->alias, "Model id in the API (default: the file name without .gguf)");
  app->add_option("--chat-template", a->chat_template,
                  "A Jinja chat template file, or the name of a built-in format (default: the model's template)");
  app->add_option("--tool-format", a->server.tool_format,
                  "How the model writes tool calls: hermes, llama3, mistral, deepseek, harmony, gemma4 (default: "
                  "from the chat template's markers)")
      ->check(CLI::IsMember({"hermes", "llama3", "mistral", "deepseek", "harmony", "gemma4"}));
  app->add_option("--max-body", a->server.max_body_bytes, "Largest request body in bytes (413 above)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  app->add_option("--http-threads", a->http_threads,
                  "Connections served at once (default: one per slot and queue place, plus 16, at most 1024)")
      ->check(CLI::Range(0, 16384));
  app->add_option("--request-timeout", a->request_timeout_s,
                  "Seconds a request's head and body may take to arrive (408 after)")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  return {app, [a] { return run_serve(*a); }};
}

}  // namespace tessera
