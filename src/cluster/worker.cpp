// Worker: the accept loop runs on the caller's thread; the one active head is served on a session thread the
// Worker owns. Every request the head sends is validated by the codec and again by the Stage.
#include "cluster/worker.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "cluster/micro_batches.h"
#include "cluster/progress.h"
#include "cluster/sampling_wire.h"
#include "cluster/stage_memory.h"
#include "cluster/stage_sampler.h"
#include "engine/grammar_vocab.h"
#include "model/stage.h"
#include "net/handshake.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::cluster {
namespace {

using namespace std::chrono_literals;

net::ForwardResult run_forward(Stage& stage, const net::Forward& f, net::WireType wire, StageSampler& sampler,
                               StageOutput& out) {
  Batch b;
  b.seq = f.seq;
  b.pos = f.pos;
  b.want_logits = f.want_output;
  b.tokens = f.tokens;
  std::vector<float> hidden;
  if (f.activations) hidden = net::decode_activations(*f.activations);
  if (!stage.is_first()) {
    const auto need = static_cast<size_t>(b.size() * stage.in_width());
    if (hidden.size() != need) fail("activations of {} values, expected {}", hidden.size(), need);
    if (b.tokens.empty()) b.tokens.assign(b.seq.size(), 0);
  }
  std::vector<StageSample> requests;
  for (const auto& s : f.sampling) requests.push_back(from_wire(s));
  std::vector<SampledToken> picks;
  forward_and_sample(stage, b, hidden.empty() ? nullptr : hidden.data(), requests, sampler, out, picks);
  net::ForwardResult r;
  r.request_id = f.request_id;
  if (stage.is_last()) {
    r.sampled = sampled_to_wire(b, requests, picks);
    // Logits travel as f32 (they decide sampling on the head), and only for output tokens nobody sampled here:
    // a micro-batch without such tokens (the early chunks of a prompt, say) carries none.
    const auto n_vocab = static_cast<size_t>(stage.config().n_vocab);
    const auto rows = static_cast<uint32_t>(out.logits.size() / n_vocab);
    if (rows > 0)
      r.logits = net::encode_activations(out.logits, rows, static_cast<uint32_t>(n_vocab), net::WireType::F32);
  } else {
    r.hidden = net::encode_activations(out.hidden, static_cast<uint32_t>(b.size()),
                                       static_cast<uint32_t>(stage.out_width()), wire);
  }
  return r;
}

// This machine's profile for the head's planner, from the cache when it is young enough.
net::ProbeReply probe_reply(ProbeCache& cache, const net::ProbeRequest& request, int threads, bool repack) {
  ProbeOptions po;
  po.threads = threads;
  po.seconds = request.seconds;
  double age = 0;
  const ProbeResult p = cache.get(po, request.max_age_s, age);
  net::ProbeReply r;
  r.threads = static_cast<uint32_t>(std::clamp<int>(p.threads, 1, static_cast<int>(net::kMaxThreads)));
  r.cores = static_cast<uint32_t>(std::max(p.cores, 1));
  r.mem_read_gbps = static_cast<float>(p.mem_read_gbps);
  r.mem_read_gbps_1t = static_cast<float>(p.mem_read_gbps_1t);
  r.int8_gops = static_cast<float>(p.int8_gops);
  r.f32_gflops = static_cast<float>(p.f32_gflops);
  r.mem_total_bytes = p.mem_total_bytes;
  r.mem_available_bytes = p.mem_available_bytes;
  r.age_s = static_cast<float>(std::min(age, 1e7));
  // The fields are printable ASCII: anything else in a CPU name becomes '?'.
  const auto printable = [](std::string text, size_t max) {
    text.resize(std::min(text.size(), max));
    for (char& ch : text) {
      if (ch < 0x20 || ch > 0x7e) ch = '?';
    }
    return text;
  };
  r.cpu = printable(p.cpu, net::kMaxModelName);
  r.isa = printable(p.isa, net::kMaxVersionText);
  r.repack = repack;
  r.machine = printable(machine_id(), net::kMaxVersionText);
  const std::string cpus = cpu_list_text(affinity_cpus());
  if (cpus.size() <= net::kMaxCpuListText) r.cpus = cpus;
  return r;
}

}  // namespace

// Before the assembler sizes its buffers for the announced tensors: do they fit at all? The full check (with the KV
// cache, buffers and the copy) follows once they are here; this one keeps a stage that can never fit from taking
// the memory first, also without --mem-limit (then the memory this process may use, its cgroup counted).
void Worker::admit_weights(const net::LoadStage& request) const {
  uint64_t announced = 0;
  for (const auto& t : request.tensors) {
    if (__builtin_add_overflow(announced, t.n_bytes, &announced)) fail("not enough memory: the stage's size overflows");
  }
  const bool by_flag = options_.mem_limit > 0;
  const uint64_t limit = by_flag ? options_.mem_limit : read_meminfo().available_bytes;
  if (limit == 0 || announced <= limit) return;
  const auto gib = [](uint64_t b) { return static_cast<double>(b) / (1 << 30); };
  fail(
      "not enough memory: the stage's weights alone are {:.2f} GiB and this worker may use {:.2f} GiB ({}); refused "
      "before any were sent",
      gib(announced), gib(limit), by_flag ? "--mem-limit" : "the memory available to it");
}

Worker::Worker(WorkerOptions options)
    : options_(std::move(options)),
      listener_(options_.listen, options_.key ? &*options_.key : nullptr, options_.transport) {
  if (options_.name.empty()) {
    // Node names are letters, digits, '.', '_' and '-': the address with its colon replaced.
    options_.name = listener_.endpoint();
    for (auto& ch : options_.name) {
      if (ch == ':') ch = '_';
    }
  }
}

Worker::~Worker() {
  stopping_ = true;
  if (session_thread_.joinable()) session_thread_.join();
}

void Worker::serve(const std::atomic<bool>& stop) {
  const net::Hello self = net::make_hello(net::Role::Worker, options_.name);
  while (!stop.load() && !stopping_.load()) {
    std::unique_ptr<net::Connection> conn;
    try {
      conn = listener_.accept(200ms);
    } catch (const std::exception& e) {
      log_warn("worker {}: {}", options_.name, e.what());
      continue;
    }
    if (!conn) continue;
    try {
      const net::Hello peer = net::receive_hello(*conn, 5s);
      if (auto refusal = net::check_hello(peer, self)) {
        conn->send(*refusal);
        conn->close("refused");
        continue;
      }
      // A head that just said Bye may still be closing: give its session a moment before calling this one busy.
      for (int i = 0; i < 20; ++i) {
        {
          std::lock_guard probe(mutex_);
          if (active_head_.empty()) break;
        }
        std::this_thread::sleep_for(50ms);
      }
      // Heads call themselves "head": "head at 10.0.0.1:40000" then, rather than "head head".
      const std::string who = peer.node_name == "head" ? fmt::format("head at {}", conn->address())
                                                       : fmt::format("head {} ({})", peer.node_name, conn->address());
      std::lock_guard lock(mutex_);
      if (!active_head_.empty()) {
        conn->send(net::refuse_hello(self, net::HelloStatus::Busy, fmt::format("busy: serving {}", active_head_)));
        conn->close("busy");
        log_info("worker {}: refused {}: busy with {}", options_.name, who, active_head_);
        continue;
      }
      if (session_thread_.joinable()) session_thread_.join();
      conn->send(net::accept_hello(self));
      active_head_ = who;
      log_info("worker {}: serving {}", options_.name, who);
      session_thread_ = std::thread([this, c = std::move(conn), head = who]() mutable { session(std::move(c), head); });
    } catch (const std::exception& e) {
      log_warn("worker {}: {}", options_.name, e.what());
    }
  }
  stopping_ = true;
  if (session_thread_.joinable()) session_thread_.join();
}

void Worker::session(std::unique_ptr<net::Connection> conn, std::string head_name) {
  std::unique_ptr<StageAssembler> assembler;
  net::LoadStage request;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<Stage> stage;
  std::unique_ptr<StageSampler> sampler;
  std::unique_ptr<TransferProgress> progress;
  StageOutput out;
  auto reply_error = [&](net::ErrorCode code, const std::string& message, uint64_t request_id = 0) {
    conn->send(error_message(code, fmt::format("worker {}: {}", options_.name, message), request_id));
  };
  auto finish_load = [&] {
    auto source = assembler->finish();
    auto weights =
        ModelWeights::load(source, {request.layer_begin, request.layer_end}, request.has_embedding, request.has_head);
    StageOptions so;
    so.n_slots = request.n_slots;
    so.n_ctx = request.n_ctx;
    so.kv_type = request.kv_type;
    so.repack = options_.repack;
    so.copy_weights = options_.copy_weights;
    const uint64_t kv_bytes =
        kv_cache_config(weights->config(), request.layer_begin, request.layer_end, so.n_slots, so.n_ctx, so.kv_type)
            .bytes();
    // The weights as this worker will hold them: its copy in huge pages (panels where the kernels keep them, up to
    // 10% larger than the rows), or the tensors' bytes in the mapping with --mmap.
    uint64_t weight_bytes = 0;
    if (so.copy_weights) {
      weight_bytes = weights->copied_bytes_for(Stage::packing_kernels());
    } else {
      for (const auto& t : request.tensors) weight_bytes += t.n_bytes;
    }
    const uint64_t buffer_bytes =
        stage_buffer_bytes(weights->config(), request.max_batch, request.n_ctx, request.has_head);
    // --repack is the worker's own flag (LoadStage does not carry the head's): the copy is counted here, before it
    // is made, with the kernels the stage will pack for (none on a CPU without AVX-512).
    const uint64_t packed_bytes = Stage::packed_bytes_for(*weights, so);
    const uint64_t need = weight_bytes + kv_bytes + buffer_bytes + packed_bytes;
    if (options_.mem_limit > 0 && need > options_.mem_limit) {
      const auto gib = [](uint64_t b) { return static_cast<double>(b) / (1 << 30); };
      const std::string packed =
          packed_bytes > 0 ? fmt::format(" + packed copy {:.2f} (--repack)", gib(packed_bytes)) : std::string();
      fail(
          "not enough memory: the stage needs {:.2f} GiB (weights {:.2f} + KV cache {:.2f} + buffers {:.2f}{}), "
          "--mem-limit is {:.2f} GiB",
          gib(need), gib(weight_bytes), gib(kv_bytes), gib(buffer_bytes), packed, gib(options_.mem_limit));
    }
    const int threads = request.threads > 0 ? request.threads : options_.threads;
    pool = std::make_unique<ThreadPool>(threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()),
                                        options_.pin);
    stage = std::make_unique<Stage>(weights, so, *pool);
    if (so.repack) {
      log_info("worker {}: weights packed for the CPU's matrix kernels: {} of memory besides the mapped layers",
               options_.name, TransferProgress::format_bytes(stage->packed_bytes()));
    }
    // One cached sampler per sequence decoding together (up to 64), so a step rebuilds none.
    sampler = std::make_unique<StageSampler>(static_cast<int32_t>(weights->config().n_vocab),
                                             std::clamp<size_t>(request.n_slots, 1, 64));
    sampler->set_trie_source([source] { return make_token_trie(*Tokenizer::from_metadata(source->metadata())); });
    // The weights figure includes the packed copy: both are memory the weights hold on this worker.
    net::LoadDone done{weight_bytes + stage->packed_bytes(), stage->cache().bytes(), buffer_bytes, {}};
    std::vector<int64_t> sizes;
    for (int64_t m : kTimedBatchTokens) {
      if (m <= static_cast<int64_t>(request.max_batch)) sizes.push_back(m);
    }
    for (const BatchTime& t : stage->time_batches(sizes, kBatchTimingRounds, kBatchTimingBudgetSeconds)) {
      done.batch_times.push_back(
          {static_cast<uint32_t>(t.tokens), static_cast<float>(std::min<double>(t.seconds, net::kMaxBatchSeconds))});
    }
    conn->send(done);
    log_info("worker {}: holding layers {}-{} of {} ({} received, {} found locally; KV cache {}, buffers {})",
             options_.name, request.layer_begin, request.layer_end - 1, request.file_name,
             TransferProgress::format_bytes(assembler->bytes_received()),
             assembler->found_in().empty() ? "none" : assembler->found_in(),
             TransferProgress::format_bytes(stage->cache().bytes()), TransferProgress::format_bytes(buffer_bytes));
    assembler.reset();
  };

  try {
    auto last_message = std::chrono::steady_clock::now();
    while (!stopping_.load()) {
      auto msg = conn->recv(200ms);
      if (!msg) {
        const auto idle = std::chrono::steady_clock::now() - last_message;
        if (options_.idle_timeout.count() > 0 && idle >= options_.idle_timeout) {
          log_info("worker {}: {} sent nothing for {:.0f} s (--idle-timeout): ending its session", options_.name,
                   head_name, std::chrono::duration<double>(idle).count());
          break;
        }
        continue;
      }
      last_message = std::chrono::steady_clock::now();
      if (auto* load = std::get_if<net::LoadStage>(&*msg)) {
        stage.reset();
        request = std::move(*load);
        try {
          admit_weights(request);
          assembler = std::make_unique<StageAssembler>(request, options_.weights);
          if (!assembler->local_problem().empty()) {
            log_warn("worker {}: not using the local file: {}", options_.name, assembler->local_problem());
          }
          progress = std::make_unique<TransferProgress>(
              fmt::format("worker {}: receiving weights from {}", options_.name, head_name), assembler->bytes_needed());
          conn->send(assembler->reply());
          if (assembler->complete()) finish_load();
        } catch (const std::exception& e) {
          assembler.reset();
          const bool oom = std::string(e.what()).find("not enough memory") != std::string::npos;
          reply_error(oom ? net::ErrorCode::OutOfMemory : net::ErrorCode::LoadFailed, e.what());
        }
      } else if (auto* chunk = std::get_if<net::WeightChunk>(&*msg)) {
        if (!assembler) {
          reply_error(net::ErrorCode::Protocol, "weight chunk without a net::LoadStage");
          continue;
        }
        try {
          assembler->receive(*chunk);
          progress->update(assembler->bytes_received());
          if (assembler->complete()) finish_load();
        } catch (const std::exception& e) {
          assembler.reset();
          const bool oom = std::string(e.what()).find("not enough memory") != std::string::npos;
          reply_error(oom ? net::ErrorCode::OutOfMemory : net::ErrorCode::LoadFailed, e.what());
        }
      } else if (auto* fwd = std::get_if<net::Forward>(&*msg)) {
        if (!stage) {
          reply_error(net::ErrorCode::Protocol, "forward before the stage was loaded", fwd->request_id);
          continue;
        }
        try {
          conn->send(run_forward(*stage, *fwd, request.wire_type, *sampler, out));
        } catch (const std::exception& e) {
          reply_error(net::ErrorCode::BadRequest, e.what(), fwd->request_id);
        }
      } else if (auto* clear = std::get_if<net::ClearSequence>(&*msg)) {
        try {
          if (stage) stage->clear_sequence(clear->seq);
        } catch (const std::exception& e) {
          reply_error(net::ErrorCode::BadRequest, e.what());
        }
      } else if (auto* trunc = std::get_if<net::TruncateSequence>(&*msg)) {
        try {
          if (stage) stage->truncate_sequence(trunc->seq, trunc->n);
        } catch (const std::exception& e) {
          reply_error(net::ErrorCode::BadRequest, e.what());
        }
      } else if (auto* probe = std::get_if<net::ProbeRequest>(&*msg)) {
        try {
          conn->send(probe_reply(probe_cache_, *probe, options_.threads, options_.repack));
        } catch (const std::exception& e) {
          reply_error(net::ErrorCode::Internal, fmt::format("probe failed: {}", e.what()));
        }
      } else if (std::holds_alternative<net::Bye>(*msg)) {
        break;
      } else {
        reply_error(net::ErrorCode::Protocol,
                    fmt::format("unexpected {} message", net::msg_type_name(net::type_of(*msg))));
      }
    }
  } catch (const std::exception& e) {
    log_info("worker {}: {} gone: {}", options_.name, head_name, e.what());
  }
  conn->close("session over");
  std::lock_guard lock(mutex_);
  active_head_.clear();
  log_info("worker {}: ready for a new head", options_.name);
}

}  // namespace tessera::cluster
