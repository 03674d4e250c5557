// WorkerSession: each message of the head is answered by the replies it returns; what a message asks that this
// stage cannot do becomes an Error reply naming the request, never an exception out of handle().
#include "cluster/worker_session.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "cluster/micro_batches.h"
#include "cluster/peer_measure.h"
#include "cluster/sampling_wire.h"
#include "cluster/stage_group.h"
#include "cluster/stage_memory.h"
#include "engine/grammar_vocab.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::cluster {
namespace {

net::ForwardResult run_forward(LocalExecutor& executor, const net::Forward& f, net::WireType wire,
                               StageSampler& sampler, StageOutput& out) {
  const Stage& stage = executor.stage();
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
  forward_and_sample(executor, b, hidden.empty() ? nullptr : hidden.data(), requests, sampler, out, picks);
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
  r.machine_read_gbps = static_cast<float>(p.machine_read_gbps);
  for (const BatchRate& b : p.batch_rates) {
    r.batch_rates.push_back({static_cast<uint32_t>(b.tokens), static_cast<float>(b.fraction)});
  }
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

WorkerSession::WorkerSession(const WorkerOptions& options, ProbeCache& probe_cache, std::string head_name)
    : options_(options), probe_cache_(probe_cache), head_name_(std::move(head_name)) {}

WorkerSession::~WorkerSession() = default;

void WorkerSession::reply_error(std::vector<net::Message>& replies, net::ErrorCode code, const std::string& message,
                                uint64_t request_id) {
  replies.push_back(error_message(code, fmt::format("worker {}: {}", options_.name, message), request_id));
}

// Before the assembler sizes its buffers for the announced tensors: do they fit at all? The full check (with the KV
// cache, buffers and the copy) follows once they are here; this one keeps a stage that can never fit from taking
// the memory first, also without --mem-limit (then the memory this process may use, its cgroup counted).
void WorkerSession::admit_weights(const net::LoadStage& request) const {
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

std::vector<net::Message> WorkerSession::handle(net::Message msg) {
  std::vector<net::Message> replies;
  try {
    if (auto* load = std::get_if<net::LoadStage>(&msg)) {
      stage_.reset();
      request_ = std::move(*load);
      try {
        admit_weights(request_);
        assembler_ = std::make_unique<StageAssembler>(request_, options_.weights);
        if (!assembler_->local_problem().empty()) {
          log_warn("worker {}: not using the local file: {}", options_.name, assembler_->local_problem());
        }
        progress_ = std::make_unique<TransferProgress>(
            fmt::format("worker {}: receiving weights from {}", options_.name, head_name_), assembler_->bytes_needed());
        replies.push_back(assembler_->reply());
        if (assembler_->complete()) finish_load(replies);
      } catch (const std::exception& e) {
        assembler_.reset();
        const bool oom = std::string(e.what()).find("not enough memory") != std::string::npos;
        reply_error(replies, oom ? net::ErrorCode::OutOfMemory : net::ErrorCode::LoadFailed, e.what());
      }
    } else if (auto* chunk = std::get_if<net::WeightChunk>(&msg)) {
      if (!assembler_) {
        reply_error(replies, net::ErrorCode::Protocol, "weight chunk without a net::LoadStage");
        return replies;
      }
      try {
        assembler_->receive(*chunk);
        progress_->update(assembler_->bytes_received());
        if (assembler_->complete()) finish_load(replies);
      } catch (const std::exception& e) {
        assembler_.reset();
        const bool oom = std::string(e.what()).find("not enough memory") != std::string::npos;
        reply_error(replies, oom ? net::ErrorCode::OutOfMemory : net::ErrorCode::LoadFailed, e.what());
      }
    } else if (auto* fwd = std::get_if<net::Forward>(&msg)) {
      if (!stage_) {
        reply_error(replies, net::ErrorCode::Protocol, "forward before the stage_ was loaded", fwd->request_id);
        return replies;
      }
      try {
        replies.push_back(run_forward(*stage_, *fwd, request_.wire_type, *sampler_, out_));
      } catch (const std::exception& e) {
        if (!request_.group.empty()) {
          // A group stage whose step failed has lost a member or its collectives' order: the stage is gone, not
          // the step. Closing the session (the error as the Bye's reason) marks the stage down at the head, which
          // replaces it (--spare, --recovery-timeout) or reports the error naming the member.
          finished_ = true;
          end_reason_ = fmt::format("worker {}: {}", options_.name, e.what());
          log_warn("{}: ending the session", end_reason_);
          return replies;
        }
        reply_error(replies, net::ErrorCode::BadRequest, e.what(), fwd->request_id);
      }
    } else if (auto* clear = std::get_if<net::ClearSequence>(&msg)) {
      try {
        if (stage_) stage_->clear_sequence(clear->seq);
      } catch (const std::exception& e) {
        reply_error(replies, net::ErrorCode::BadRequest, e.what());
      }
    } else if (auto* trunc = std::get_if<net::TruncateSequence>(&msg)) {
      try {
        if (stage_) stage_->truncate_sequence(trunc->seq, trunc->n);
      } catch (const std::exception& e) {
        reply_error(replies, net::ErrorCode::BadRequest, e.what());
      }
    } else if (auto* probe = std::get_if<net::ProbeRequest>(&msg)) {
      try {
        net::ProbeReply reply = probe_reply(probe_cache_, *probe, options_.threads, options_.repack);
        reply.peer_links = measure_peers(probe->peers, options_);
        replies.push_back(std::move(reply));
      } catch (const std::exception& e) {
        reply_error(replies, net::ErrorCode::Internal, fmt::format("probe failed: {}", e.what()));
      }
    } else if (std::holds_alternative<net::Bye>(msg)) {
      finished_ = true;
    } else {
      reply_error(replies, net::ErrorCode::Protocol,
                  fmt::format("unexpected {} message", net::msg_type_name(net::type_of(msg))));
    }
  } catch (const std::exception& e) {
    reply_error(replies, net::ErrorCode::Internal, e.what());
  }
  return replies;
}

void WorkerSession::finish_load(std::vector<net::Message>& replies) {
  auto source = assembler_->finish();
  auto weights =
      ModelWeights::load(source, {request_.layer_begin, request_.layer_end}, request_.has_embedding, request_.has_head);
  StageOptions so;
  so.n_slots = request_.n_slots;
  so.n_ctx = request_.n_ctx;
  so.kv_type = request_.kv_type;
  so.repack = options_.repack;
  so.copy_weights = options_.copy_weights;
  const uint64_t kv_bytes =
      kv_cache_config(weights->config(), request_.layer_begin, request_.layer_end, so.n_slots, so.n_ctx, so.kv_type)
          .bytes();
  // The weights as this worker will hold them: its copy in huge pages (panels where the kernels keep them, up to
  // 10% larger than the rows), or the tensors' bytes in the mapping with --mmap.
  uint64_t weight_bytes = 0;
  if (so.copy_weights) {
    weight_bytes = weights->copied_bytes_for(Stage::packing_kernels());
  } else {
    for (const auto& t : request_.tensors) weight_bytes += t.n_bytes;
  }
  const uint64_t buffer_bytes =
      stage_buffer_bytes(weights->config(), request_.max_batch, request_.n_ctx, request_.has_head);
  // --repack is the worker's own flag (LoadStage does not carry the head's): the copy is counted here, before it
  // is made, with the kernels the stage_ will pack for (none on a CPU without AVX-512).
  const uint64_t packed_bytes = Stage::packed_bytes_for(*weights, so);
  const uint64_t need = weight_bytes + kv_bytes + buffer_bytes + packed_bytes;
  if (options_.mem_limit > 0 && need > options_.mem_limit) {
    const auto gib = [](uint64_t b) { return static_cast<double>(b) / (1 << 30); };
    const std::string packed =
        packed_bytes > 0 ? fmt::format(" + packed copy {:.2f} (--repack)", gib(packed_bytes)) : std::string();
    fail(
        "not enough memory: the stage_ needs {:.2f} GiB (weights {:.2f} + KV cache {:.2f} + buffers {:.2f}{}), "
        "--mem-limit is {:.2f} GiB",
        gib(need), gib(weight_bytes), gib(kv_bytes), gib(buffer_bytes), packed, gib(options_.mem_limit));
  }
  const int threads = request_.threads > 0 ? request_.threads : options_.threads;
  std::shared_ptr<collective::Communicator> group;
  if (!request_.group.empty()) {
    // A stage held by a group: this worker is its rank 0 and links the others as a head does for --tp.
    if (!options_.key)
      fail("a stage held by a group needs the cluster key (--key-file): its members link to each other");
    const net::GroupJoin join = stage_group_join(request_);
    std::vector<GroupWorker> members;
    for (const auto& m : request_.group) members.push_back({m.name, m.address});
    // This leader holds every byte of the stage: a member without the model receives its share from it.
    group = start_stage_group(join, options_.name, members, *options_.key,
                              stage_shares(weights, join, static_cast<int>(members.size()) + 1));
    so.shard = stage_group_shard(join, 0, static_cast<int>(members.size()) + 1);
  }
  stage_ = std::make_unique<LocalExecutor>(
      weights, so, threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency()), options_.pin, group);
  // A group's leader holds its share of the layers: that is what it reports.
  if (group && so.copy_weights) weight_bytes = stage_->stage().copied_bytes();
  if (so.repack) {
    log_info("worker {}: weights packed for the CPU's matrix kernels: {} of memory besides the mapped layers",
             options_.name, TransferProgress::format_bytes(stage_->stage().packed_bytes()));
  }
  // One cached sampler_ per sequence decoding together (up to 64), so a step rebuilds none.
  sampler_ = std::make_unique<StageSampler>(static_cast<int32_t>(weights->config().n_vocab),
                                            std::clamp<size_t>(request_.n_slots, 1, 64));
  sampler_->set_trie_source([source] { return make_token_trie(*Tokenizer::from_metadata(source->metadata())); });
  // The weights figure includes the packed copy: both are memory the weights hold on this worker.
  net::LoadDone done{weight_bytes + stage_->stage().packed_bytes(), stage_->stage().cache().bytes(), buffer_bytes, {}};
  std::vector<int64_t> sizes;
  for (int64_t m : kTimedBatchTokens) {
    if (m <= static_cast<int64_t>(request_.max_batch)) sizes.push_back(m);
  }
  for (const BatchTime& t : stage_->time_batches(sizes, group ? 1 : kBatchTimingRounds, kBatchTimingBudgetSeconds)) {
    done.batch_times.push_back(
        {static_cast<uint32_t>(t.tokens), static_cast<float>(std::min<double>(t.seconds, net::kMaxBatchSeconds))});
  }
  replies.push_back(std::move(done));
  log_info("worker {}: holding layers {}-{} of {} ({} received, {} found locally; KV cache {}, buffers {})",
           options_.name, request_.layer_begin, request_.layer_end - 1, request_.file_name,
           TransferProgress::format_bytes(assembler_->bytes_received()),
           assembler_->found_in().empty() ? "none" : assembler_->found_in(),
           TransferProgress::format_bytes(stage_->stage().cache().bytes()),
           TransferProgress::format_bytes(buffer_bytes));
  assembler_.reset();
}

}  // namespace tessera::cluster
