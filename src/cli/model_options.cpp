// Shared model/sampler flags and model loading for the CLI commands.
#include "cli/model_options.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

#include "cli/parallel_start.h"
#include "cli/pipeline_start.h"
#include "cli/table.h"
#include "cluster/link_group.h"
#include "cluster/model_identity.h"
#include "cluster/stage_memory.h"
#ifdef TESSERA_HAVE_MPI
#include "collective/mpi_communicator.h"
#endif
#include "hw/probe.h"
#include "model/kv_cache.h"
#include "plan/live_cluster.h"
#include "plan/split_spec.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {

std::string default_model_path() { return TESSERA_DEFAULT_MODEL; }

void add_model_options(CLI::App& app, ModelOptions& o, bool with_compute) {
  o.model = default_model_path();
  app.add_option("-m,--model", o.model, "GGUF model file (default: the bundled stories260K)");
  if (!with_compute) return;
  app.add_option("-t,--threads", o.threads, "Threads (default: all cores)")->check(CLI::Range(0, 1024));
  app.add_option("-c,--ctx-size", o.n_ctx, "Context size in tokens (default: the model's, at most 4096)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app.add_option("-b,--batch-size", o.n_batch, "Prompt tokens per forward pass")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--kv-type,--cache-type-k", o.kv_type, "KV cache type: f16 or f32")
      ->check(CLI::IsMember({"f16", "f32"}))
      ->capture_default_str();
  add_repack_option(app, o.repack);
  add_mmap_option(app, o.mmap);
  add_pin_option(app, o.pin);
  app.add_flag("--exact-gelu", o.exact_gelu,
               "Gemma: evaluate GELU exactly in f32 instead of through llama.cpp's fp16 table (whose values the "
               "reference outputs come from)");
  add_parallel_options(app, o);
}

void add_parallel_options(CLI::App& app, ModelOptions& o) {
  app.add_option("--tp", o.tp,
                 "Tensor parallelism: split every layer over N ranks started by mpirun -np N (or srun -n N "
                 "--mpi=pmix); each rank "
                 "holds about 1/N of the weights (docs/parallel.md)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--ep", o.ep, "Expert parallelism: whole experts of a MoE placed on N ranks (mpirun -np N)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--pp", o.pp,
                 "Under mpirun: a pipeline of P groups of ranks, each holding a range of layers (with --tp N, "
                 "mpirun -np N*P: tensor parallel inside each group; docs/parallel.md)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--ep-redundancy", o.ep_redundancy,
                 "Under --ep: each rank also holds copies of this fraction of its own count of experts (the next "
                 "rank's first ones), so a token's picks can be dealt evenly; 0: every expert on one rank, the least "
                 "memory")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--tp-shares", o.tp_shares,
                 "Uneven shares of the ranks under --tp/--ep, one per rank, like 2,1,1 (default: equal)");
  app.add_option("--shard-alone", o.shard_alone,
                 "bench only: time each rank's share of --tp/--ep N alone (or rank R's), as on a machine of its own, "
                 "with collectives that exchange nothing: the timings count, the tokens do not (docs/parallel.md)")
      ->expected(0, 1)
      ->default_str("all");
  app.add_option("--collective-timeout", o.collective_timeout,
                 "Seconds a collective waits for the slowest rank before the run ends with an error")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
}

void add_pin_option(CLI::App& app, bool& pin) {
  app.add_flag("--pin", pin,
               "Bind each compute worker thread to its own CPU (worker i to the i-th this process may use, as "
               "taskset allows; the thread that calls them, thread 0, stays free): no migrations, at the price of "
               "sharing a CPU with whatever else runs there");
}

void add_mmap_option(CLI::App& app, bool& mmap) {
  app.add_flag("--mmap", mmap,
               "Read the weights in place from the memory-mapped file instead of copying them into huge pages at "
               "load: less private memory, slower decode");
}

void add_repack_option(CLI::App& app, bool& repack) {
  app.add_flag("--repack", repack,
               "Pack the weights at load into the layout of the CPU's matrix kernels: faster prompt processing and "
               "batched decode, for about 1.3 bytes per weight more memory (AVX-512 machines)");
}

void add_sampler_options(CLI::App& app, SamplerParams& p) {
  app.add_option("--temp", p.temperature, "Temperature (0: greedy)")->capture_default_str();
  app.add_option("--top-k", p.top_k, "Top-k sampling (0: off)")->capture_default_str();
  app.add_option("--top-p", p.top_p, "Top-p sampling (1: off)")->capture_default_str();
  app.add_option("--min-p", p.min_p, "Min-p sampling (0: off)")->capture_default_str();
  app.add_option("--repeat-penalty", p.repeat_penalty, "Repetition penalty (1: off)")->capture_default_str();
  app.add_option("--repeat-last-n", p.repeat_last_n, "Tokens the penalties look back over (-1: all)")
      ->capture_default_str();
  app.add_option("--presence-penalty", p.presence_penalty, "Presence penalty")->capture_default_str();
  app.add_option("--frequency-penalty", p.frequency_penalty, "Frequency penalty")->capture_default_str();
  app.add_option("-s,--seed", p.seed, "Random seed (default: random)");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const auto file = gguf::GgufFile::open(path);
  try {
    return Tokenizer::from_metadata(file.metadata());
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

void log_repack(uint64_t packed_bytes, std::string_view node) {
  const std::string who = node.empty() ? std::string() : fmt::format("{}: ", node);
  if (packed_bytes > 0) {
    log_info("{}weights packed for the CPU's matrix kernels: {} of memory besides the mapped file", who,
             human_bytes(packed_bytes));
  } else {
    log_warn(
        "{}--repack: this CPU's kernels have no packed layout for these weights (AVX-512 only); they stay as "
        "mapped",
        who);
  }
}

StageOptions stage_options(const ModelOptions& o, const ModelConfig& c, int64_t n_slots) {
  StageOptions so;
  so.n_slots = n_slots;
  so.n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min<int64_t>(c.n_ctx_train, 4096);
  so.kv_type = o.kv_type == "f32" ? GgmlType::F32 : GgmlType::F16;
  so.repack = o.repack;
  so.copy_weights = !o.mmap;
  so.exact_gelu = o.exact_gelu;
  return so;
}

ShardSpec shard_spec(const ModelOptions& o, int rank) {
  const int n = std::max(o.tp, o.ep);
  ShardSpec spec;
  spec.rank = rank;
  spec.n_ranks = n;
  spec.tp = o.tp > 1;
  spec.ep = o.ep > 1;
  spec.ep_redundancy = o.ep > 1 ? o.ep_redundancy : 0.0;
  if (!o.tp_shares.empty()) spec.shares = parse_shares(o.tp_shares, n);
  return spec;
}

namespace {

// This rank's share of every layer (m.comm is its group), and the collectives measured at start (and the ranks
// profiled, for the plan).
void share_out(const ModelOptions& o, LoadedModel& m, StageOptions& so, int threads, const char* backend) {
  const int n = std::max(o.tp, o.ep);
  so.shard = shard_spec(o, m.comm->rank());
  if (n == 1) return;  // a pipeline of single ranks: nothing to measure between the ranks of a stage
  ParallelStartOptions po;
  po.mode = o.tp > 1 && o.ep > 1 ? plan::ParallelMode::TensorExpert
            : o.tp > 1           ? plan::ParallelMode::Tensor
                                 : plan::ParallelMode::Expert;
  po.shares = so.shard.shares;
  po.ep_redundancy = so.shard.ep_redundancy;
  po.threads = threads;
  po.backend = backend;
  po.show = !m.world || m.world->rank() == 0;
  // Under --pp every rank was probed before the layers were cut (cut_pipeline).
  po.profile = o.profile_ranks && o.pp == 1;
  m.parallel = start_parallel(*m.comm, po);
}

// The head of a group over worker daemons (--workers with --tp/--ep): rank 0 of the workers it names.
std::shared_ptr<collective::Communicator> start_worker_group(const ModelOptions& o, const LoadedModel& m,
                                                             const StageOptions& so, int64_t n_slots) {
  const int n = std::max(o.tp, o.ep);
  const auto workers = plan::parse_worker_list(o.rank_workers);
  const char* flag = o.tp > 1 ? "--tp" : "--ep";
  if (o.pp > 1) {
    fail(
        "--pp with --workers: a pipeline of groups over worker links is written with --place, one entry a stage (say "
        "--place 'tp(local,a),tp(b,c)'), without --tp/--ep/--pp");
  }
  if (static_cast<int>(workers.size()) + 1 != n) {
    fail(
        "{} {} over --workers: the head is rank 0 and each worker one more rank, so it needs {} worker(s); {} given "
        "({})",
        flag, n, n - 1, workers.size(), o.rank_workers);
  }
  if (o.tp > 1 && o.ep > 1 && o.tp != o.ep) {
    fail("--tp {} and --ep {}: with both, the same ranks split the layers and hold the experts (give equal N)", o.tp,
         o.ep);
  }
  if (o.ep > 1 && m.weights->config().n_expert == 0) fail("--ep {}: {} has no experts", o.ep, o.model);
  if (o.rank_key_file.empty()) {
    fail(
        "{} over --workers needs --key-file: the workers link to each other, and only the cluster key authenticates "
        "them",
        flag);
  }
  const auto wire = net::wire_type_from_name(o.rank_wire);
  if (!wire) fail("--wire-type {}: f32, f16 or bf16", o.rank_wire);
  const net::ClusterKey key = net::load_cluster_key(o.rank_key_file);
  cluster::GroupStart start;
  for (const auto& w : workers) start.workers.push_back({w.name, w.address});
  start.key = &key;
  const gguf::GgufFile& file = m.weights->file();
  net::GroupJoin& j = start.join;
  j.file_name = std::filesystem::path(o.model).filename().string();
  j.file_size = file.file_size();
  j.model_hash = cluster::model_identity(file);
  j.tp = o.tp > 1;
  j.ep = o.ep > 1;
  j.ep_redundancy = o.ep > 1 ? o.ep_redundancy : 0.0f;
  j.shares = o.tp_shares;
  j.n_slots = static_cast<uint32_t>(n_slots);
  j.n_ctx = static_cast<uint32_t>(so.n_ctx);
  j.kv_type = so.kv_type;
  j.wire_type = *wire;
  j.threads = static_cast<uint16_t>(std::max(0, o.threads));
  j.exact_gelu = so.exact_gelu;
  j.profile = o.profile_ranks;
  j.timeout_s = static_cast<float>(o.collective_timeout);
  start.link.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.collective_timeout * 1000));
  start.link.wire = *wire;
  // A worker without the model receives the bytes its rank's share reads, once (its --cache keeps them).
  start.share = [&](int rank) {
    const ShardSpec spec = shard_spec(o, rank);
    net::GroupJoin mine = start.join;
    mine.rank = static_cast<uint32_t>(rank);
    mine.members.resize(static_cast<size_t>(n));
    return cluster::share_source(m.weights, spec, cluster::share_key(mine));
  };
  return cluster::start_group(start).comm;
}

// MPI and this rank's share of the layers, for --tp/--ep/--pp; the collectives measured (and the ranks profiled).
// World rank r is rank r % N of stage P - 1 - r / N (N ranks a stage, P stages): rank 0 holds a share of the last
// stage, where the tokens are sampled.
void start_ranks(const ModelOptions& o, LoadedModel& m, StageOptions& so, int threads) {
  const int n = std::max(o.tp, o.ep);
  if (o.tp > 1 && o.ep > 1 && o.tp != o.ep) {
    fail("--tp {} and --ep {}: with both, the same ranks split the layers and hold the experts (give equal N)", o.tp,
         o.ep);
  }
  if (o.ep > 1 && m.weights->config().n_expert == 0) fail("--ep {}: {} has no experts", o.ep, o.model);
  const int total = n * o.pp;
#ifdef TESSERA_HAVE_MPI
  const std::string flags = o.pp > 1 ? fmt::format("--tp/--ep {} --pp {}", n, o.pp) : fmt::format("--tp/--ep {}", n);
  const collective::Launch launch = collective::MpiSession::launch();
  if (launch == collective::Launch::none) {
    fail("{} runs on {} ranks: start it as {}{}", flags, total, collective::launch_hint(total),
         o.pp > 1 ? "; a pipeline over machines without MPI is --workers" : "");
  }
  if (launch == collective::Launch::srun_without_pmix) {
    // Open MPI would abort inside MPI_Init with a page about rebuilding it; the fix is srun's option.
    fail(
        "{} runs on {} ranks: srun started this rank without PMIx, which this tessera's MPI needs to find the "
        "others: srun -n {} --mpi=pmix tessera ... (or MpiDefault=pmix in slurm.conf; srun --mpi=list shows them)",
        flags, total, total);
  }
  auto session = std::make_shared<collective::MpiSession>();
  if (session->size() != total) {
    const char* launcher = collective::launcher_name(launch);
    fail("{} needs {} ranks, {} started {} ({})", flags, total, launcher, session->size(),
         launch == collective::Launch::srun ? fmt::format("srun -n {} --mpi=pmix", total)
                                            : fmt::format("mpirun -np {}", total));
  }
  auto world = std::make_shared<collective::MpiCommunicator>(
      session, std::chrono::milliseconds(static_cast<int64_t>(o.collective_timeout * 1000)));
  m.comm = world;
  std::optional<PipelineCut> cut;
  if (o.pp > 1) {
    const int stage = o.pp - 1 - world->rank() / n;
    cut = cut_pipeline(*world, o, *m.weights, n, threads);
    const LayerRange r = cut->ranges[static_cast<size_t>(stage)];
    m.weights = ModelWeights::load(o.model, r, stage == 0, stage == o.pp - 1);
    m.world = world;
    m.comm = world->split(stage);
    m.pipe.world = world;
    m.pipe.n_stages = o.pp;
    if (stage > 0) m.pipe.prev = world->rank() + n;
    if (stage < o.pp - 1) m.pipe.next = world->rank() - n;
    m.stage = stage;
  }
  share_out(o, m, so, threads, "MPI");
  if (cut) m.parallel = finish_pipeline(*world, *cut, std::move(m.parallel), n);
#else
  (void)m;
  (void)so;
  (void)threads;
  fail(
      "--tp/--ep/--pp over {} ranks: this tessera was built without MPI (apt install libopenmpi-dev openmpi-bin, then "
      "rebuild)",
      total);
#endif
}

}  // namespace

// Each rank's share, on rank 0, as a table: what it holds and where.
void log_shard(const LocalExecutor& e, collective::Communicator& comm, int stage, std::string_view split) {
  const Stage& s = e.stage();
  const double mib = 1.0 / (1024.0 * 1024.0);
  std::vector<float> mine = {static_cast<float>(comm.rank()),
                             static_cast<float>(stage),
                             static_cast<float>(s.layers().begin),
                             static_cast<float>(s.layers().end),
                             static_cast<float>(static_cast<double>(s.copied_bytes()) * mib),
                             static_cast<float>(static_cast<double>(s.cache().bytes()) * mib)};
  std::vector<float> all;
  comm.gather(mine, all, 0);
  if (comm.rank() != 0) return;
  bool piped = false;  // some rank is in a stage other than 0
  for (size_t i = 1; i < all.size(); i += 6) piped = piped || all[i] != 0.0f;
  std::string table = piped ? "rank  stage  layers  weights MiB  KV cache MiB\n" : "rank  weights MiB  KV cache MiB\n";
  for (size_t i = 0; i + 5 < all.size(); i += 6) {
    const std::string layers = fmt::format("{}-{}", static_cast<int>(all[i + 2]), static_cast<int>(all[i + 3]) - 1);
    table += piped ? fmt::format("{:>4}  {:>5}  {:>6}  {:>11.1f}  {:>12.1f}\n", static_cast<int>(all[i]),
                                 static_cast<int>(all[i + 1]), layers, all[i + 4], all[i + 5])
                   : fmt::format("{:>4}  {:>11.1f}  {:>12.1f}\n", static_cast<int>(all[i]), all[i + 4], all[i + 5]);
  }
  const ShardSpec& spec = s.shard();
  if (piped) {
    log_info("{} ranks, a pipeline of stages{}{}:\n{}", comm.size(),
             spec.sharded() ? fmt::format(" of {} ranks each holding its share of the stage's layers", spec.n_ranks)
                            : std::string(" of one rank each"),
             split.empty() ? std::string() : fmt::format("; layers {}", split), table);
    return;
  }
  log_info("{} ranks ({}{}{}), each holding its share of every layer:\n{}", comm.size(), spec.tp ? "tensor" : "",
           spec.tp && spec.ep ? " and " : "", spec.ep ? "expert parallel" : " parallel", table);
}

// Before the copy of the weights is made: does it fit in the memory this process may use (MemAvailable, capped by
// its control group's limit)? If not, the weights stay mapped; if even the KV cache and buffers do not fit, an
// error that says what would.
void fit_to_memory(const ModelOptions& o, const ModelWeights& w, StageOptions& so) {
  const MemInfo mem = read_meminfo();
  if (mem.available_bytes == 0) return;
  const ModelConfig& c = w.config();
  const uint64_t kv = kv_cache_config(c, 0, c.n_layer, so.n_slots, so.n_ctx, so.kv_type).bytes();
  const uint64_t fixed =
      kv + cluster::stage_buffer_bytes(c, o.n_batch, so.n_ctx, true) + Stage::packed_bytes_for(w, so);
  const std::string limit = mem.cgroup_limit_bytes > 0
                                ? fmt::format(" (its control group's limit is {})", human_bytes(mem.cgroup_limit_bytes))
                                : std::string();
  if (fixed > mem.available_bytes) {
    fail(
        "{}: the KV cache ({} for {} sequence(s) of {} positions) and buffers need {}, more than the {} this process "
        "may use{}: give a smaller --ctx-size or fewer parallel sequences, or split the model over more nodes",
        o.model, human_bytes(kv), so.n_slots, so.n_ctx, human_bytes(fixed), human_bytes(mem.available_bytes), limit);
  }
  if (!so.copy_weights) return;
  const uint64_t copy = w.copied_bytes_for(Stage::packing_kernels());
  if (fixed + copy + copy / 20 <= mem.available_bytes) return;
  so.copy_weights = false;
  log_warn(
      "{}: a private copy of the weights ({}) does not fit in the {} this process may use{}: they are read in place "
      "from the mapped file instead (as --mmap: decode is slower; more memory, a smaller quantization or more nodes "
      "give it back)",
      o.model, human_bytes(copy), human_bytes(mem.available_bytes), limit);
}

LoadedModel load_model(const ModelOptions& o, int64_t n_slots, bool with_executor,
                       std::shared_ptr<collective::Communicator> group,
                       std::shared_ptr<const gguf::TensorSource> source) {
  if (!o.shard_alone.empty()) {
    fail(
        "--shard-alone is bench's: a rank that stands alone adds none of the other ranks' partial sums, so its logits "
        "and tokens are not the model's; only its timings mean something (tessera bench ... --tp N --shard-alone)");
  }
  const auto t0 = std::chrono::steady_clock::now();
  LoadedModel m;
  m.weights = source ? ModelWeights::load(std::move(source), {0, -1}, true, true) : ModelWeights::load(o.model);
  try {
    m.tokenizer = Tokenizer::from_metadata(m.weights->source().metadata());
  } catch (const Error& e) {
    fail("{}: {}", o.model, e.what());
  }
  const ModelConfig& c = m.weights->config();
  if (m.tokenizer->n_vocab() != c.n_vocab) {
    fail("{}: the tokenizer has {} tokens but the model's vocabulary is {}", o.model, m.tokenizer->n_vocab(),
         c.n_vocab);
  }
  StageOptions so = stage_options(o, c, n_slots);
  // A rank under --tp/--ep holds a share: the whole model's figures would overstate it.
  if (with_executor && !o.parallel_ranks()) fit_to_memory(o, *m.weights, so);
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.parallel_ranks()) {
    if (!with_executor) fail("--tp/--ep/--pp: a pipeline over --workers cannot also split its layers");
    if (group) {
      m.comm = std::move(group);
      share_out(o, m, so, threads, "worker links");
    } else if (!o.rank_workers.empty()) {
      m.comm = start_worker_group(o, m, so, n_slots);
      share_out(o, m, so, threads, "worker links");
    } else {
      start_ranks(o, m, so, threads);
    }
  }
  if (with_executor) {
    m.executor = std::make_unique<LocalExecutor>(m.weights, so, threads, o.pin, m.comm, m.pipe);
    if (so.repack) log_repack(m.executor->stage().packed_bytes(), "");
    collective::Communicator* everyone = m.world ? m.world.get() : m.comm.get();
    if (everyone) log_shard(*m.executor, *everyone, m.stage, m.parallel ? m.parallel->split : std::string());
    if (everyone && everyone->rank() != 0) {
      m.executor->follow();
      m.follower_done = true;
    }
  }
  m.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

std::string process_escapes(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\' || i + 1 == in.size()) {
      out += in[i];
      continue;
    }
    const char c = in[++i];
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
      case '"':
      case '\'':
        out += c;
        break;
      case 'x':
        if (i + 2 < in.size() && std::isxdigit(static_cast<unsigned char>(in[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
          out += static_cast<char>(std::stoi(std::string(in.substr(i + 1, 2)), nullptr, 16));
          i += 2;
          break;
        }
        [[fallthrough]];
      default:
        out += '\\';
        out += c;
    }
  }
  return out;
}

}  // namespace tessera
