// RemoteStageEndpoint: loading is synchronous (LoadStage, LoadReply, weight chunks, LoadDone); afterwards a
// receiver thread owned by this object matches ForwardResults to jobs in submission order.
#include "cluster/remote_stage_endpoint.h"

#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include "cluster/sampling_wire.h"
#include "gguf/gguf_writer.h"
#include "model/tensor_layout.h"
#include "net/handshake.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera::cluster {
namespace {

using namespace std::chrono_literals;

constexpr size_t kChunkBytes = 16u << 20;

// The model's metadata as a tensor-less GGUF, plus the vocab size that the tokenizer's list would otherwise give.
// Only the stage with the output head gets the tokenizer: it builds the vocabulary trie of grammar-constrained
// sampling (the others never tokenize).
std::vector<uint8_t> stage_metadata(const ModelWeights& model, bool has_head) {
  gguf::GgufWriter w;
  for (const auto& [key, value] : model.source().metadata().entries()) {
    if (!has_head && key.rfind("tokenizer.", 0) == 0) continue;
    w.set(key, value);
  }
  const auto& c = model.config();
  w.set(c.arch_name + ".vocab_size", gguf::Value(static_cast<uint32_t>(c.n_vocab)));
  return w.to_bytes();
}

bool stage_needs(const TensorSpec& spec, LayerRange layers, bool has_embedding, bool has_head, bool tied) {
  if (spec.layer >= 0) return layers.contains(spec.layer);
  switch (spec.role) {
    case TensorRole::TokenEmbd:
      return has_embedding || (has_head && tied);
    case TensorRole::PerLayerTokEmbd:  // Gemma 4's per-layer inputs are computed where the tokens are embedded
    case TensorRole::PerLayerProj:
    case TensorRole::PerLayerProjNorm:
      return has_embedding;
    case TensorRole::Output:
    case TensorRole::OutputNorm:
      return has_head;
    case TensorRole::RopeFreqs:
      return true;
    default:
      return false;
  }
}

template <typename T>
T expect(net::Connection& conn, std::chrono::milliseconds timeout, const std::string& node, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) fail("worker {}: no {} within {} s", node, what, timeout.count() / 1000);
    auto msg = conn.recv(std::min(left, std::chrono::milliseconds(500)));
    if (!msg) continue;
    if (auto* t = std::get_if<T>(&*msg)) return std::move(*t);
    if (auto* e = std::get_if<net::ErrorMsg>(&*msg)) fail("{}", e->message);
    if (std::holds_alternative<net::LoadProgress>(*msg)) continue;
    fail("worker {}: expected {}, got {}", node, what, net::msg_type_name(net::type_of(*msg)));
  }
}

}  // namespace

RemoteStageEndpoint::RemoteStageEndpoint(std::string node, const std::string& address, const net::ClusterKey* key,
                                         int stage_index, const ModelWeights& model, LayerRange layers,
                                         bool has_embedding, bool has_head, const RemoteStageOptions& options,
                                         CompletionQueue& done)
    : node_(std::move(node)),
      target_(address),
      index_(stage_index),
      layers_(layers),
      first_(has_embedding),
      last_(has_head),
      wire_(options.wire),
      in_width_(model.config().boundary_width(layers.begin)),
      out_width_(model.config().boundary_width(layers.end)),
      n_vocab_(model.config().n_vocab),
      done_(done) {
  try {
    conn_ = connect(address, key, options.connect_timeout, options.transport);
    net::client_handshake(*conn_, net::make_hello(net::Role::Head, "head"), options.connect_timeout);
    net::MeasureOptions mo;
    mo.pings = 5;
    mo.transfer_bytes = std::max<uint32_t>(1, options.measure_bytes);
    link_ = net::measure_link(*conn_, mo);
    if (options.measure_bytes == 0) link_.upload_bytes_per_s = link_.download_bytes_per_s = 0;
  } catch (const Error& e) {
    fail("worker {} ({}): {}", node_, address, e.what());
  }
  load(model, has_embedding, has_head, options);
  receiver_ = std::thread([this] { receive_loop(); });
}

bool RemoteStageEndpoint::up() const {
  std::lock_guard lock(mutex_);
  return broken_.empty();
}

RemoteStageEndpoint::~RemoteStageEndpoint() {
  stop_ = true;
  if (receiver_.joinable()) receiver_.join();
  try {
    conn_->close("head finished");
  } catch (const Error&) {
    // The worker may already be gone; nothing is left to tell it.
  }
}

StageRequest stage_request(const ModelWeights& model, LayerRange layers, bool has_embedding, bool has_head,
                           const RemoteStageOptions& options) {
  const auto& file = model.source();
  const auto& c = model.config();
  StageRequest out;
  net::LoadStage& req = out.load;
  req.file_name = std::filesystem::path(file.name()).filename().string();
  req.file_size = model.file().file_size();
  req.model_name = c.name;
  req.model_metadata = stage_metadata(model, has_head);
  for (const auto& spec : expected_tensors(c)) {
    if (!stage_needs(spec, layers, has_embedding, has_head, c.tied_output)) continue;
    const gguf::TensorInfo* t = file.find_tensor(spec.name);
    if (t == nullptr) continue;  // optional tensors the file does not have
    net::TensorInfo info;
    info.name = t->name;
    info.type = t->type;
    info.n_bytes = t->n_bytes;
    for (auto d : t->ne) info.shape.push_back(static_cast<uint64_t>(d));
    const auto data = file.tensor_data(*t);
    info.hash = net::content_hash(data);
    out.data_of[net::hash_hex(info.hash)] = data;
    req.tensors.push_back(std::move(info));
  }
  req.layer_begin = static_cast<uint32_t>(layers.begin);
  req.layer_end = static_cast<uint32_t>(layers.end);
  req.has_embedding = has_embedding;
  req.has_head = has_head;
  req.n_slots = static_cast<uint32_t>(options.stage.n_slots);
  req.n_ctx = static_cast<uint32_t>(options.stage.n_ctx);
  req.kv_type = options.stage.kv_type;
  req.wire_type = options.wire;
  req.threads = static_cast<uint16_t>(options.threads);
  req.max_batch = static_cast<uint32_t>(std::clamp<int64_t>(options.max_batch, 1, net::kMaxBatchTokens));
  req.group = options.group;
  req.model_hash = options.model_hash;
  req.group_tp = options.group_tp;
  req.group_ep = options.group_ep;
  req.group_timeout_s = options.group_timeout_s;
  req.group_shares = options.group_shares;
  req.group_ep_redundancy = options.group_ep_redundancy;
  return out;
}

void StageRequest::for_each_chunk(const net::Hash128& hash,
                                  const std::function<void(const net::WeightChunk&)>& send) const {
  const auto it = data_of.find(net::hash_hex(hash));
  if (it == data_of.end()) fail("the worker asked for tensor {} that the stage does not use", net::hash_hex(hash));
  const auto data = it->second;
  for (size_t off = 0; off < data.size(); off += kChunkBytes) {
    net::WeightChunk chunk;
    chunk.hash = hash;
    chunk.offset = off;
    const size_t n = std::min(kChunkBytes, data.size() - off);
    chunk.data.assign(data.begin() + static_cast<std::ptrdiff_t>(off),
                      data.begin() + static_cast<std::ptrdiff_t>(off + n));
    send(chunk);
  }
}

void RemoteStageEndpoint::load(const ModelWeights& model, bool has_embedding, bool has_head,
                               const RemoteStageOptions& options) {
  const StageRequest request = stage_request(model, layers_, has_embedding, has_head, options);
  const auto& data_of = request.data_of;
  conn_->send(request.load);

  const net::LoadReply reply = expect<net::LoadReply>(*conn_, 120s, node_, "answer to the stage request");
  uint64_t total = 0;
  for (const auto& h : reply.need) {
    auto it = data_of.find(net::hash_hex(h));
    if (it == data_of.end()) fail("worker {} asked for tensor {} that the stage does not use", node_, net::hash_hex(h));
    total += it->second.size();
  }
  uint64_t sent = 0;
  for (const auto& h : reply.need) {
    request.for_each_chunk(h, [&](const net::WeightChunk& chunk) {
      conn_->send(chunk);
      sent += chunk.data.size();
      if (options.progress) options.progress(sent, total);
    });
  }
  const net::LoadDone done = expect<net::LoadDone>(*conn_, 600s, node_, "confirmation that the stage is loaded");
  report_ = {sent, done.weights_bytes, done.kv_bytes, done.buffer_bytes};
  batch_times_.clear();
  for (const auto& t : done.batch_times) batch_times_.push_back({t.tokens, t.seconds});
}

void RemoteStageEndpoint::fail_pending(const std::string& why) {
  std::deque<InFlight> jobs;
  {
    std::lock_guard lock(mutex_);
    if (broken_.empty()) broken_ = why;
    jobs.swap(in_flight_);
  }
  for (const auto& job : jobs) {
    StageDone d;
    d.stage = index_;
    d.id = job.id;
    d.error = why;
    done_.push(std::move(d));
  }
}

void RemoteStageEndpoint::receive_loop() {
  while (!stop_.load()) {
    std::optional<net::Message> msg;
    try {
      msg = conn_->recv(200ms);
    } catch (const std::exception& e) {
      fail_pending(fmt::format("worker {} lost: {}", node_, e.what()));
      return;
    }
    if (!msg) continue;
    // The worker ended the session (a group stage whose member failed says why): the stage is down.
    if (const auto* bye = std::get_if<net::Bye>(&*msg)) {
      fail_pending(fmt::format("worker {} lost: it closed the connection{}", node_,
                               bye->reason.empty() ? "" : " (" + bye->reason + ")"));
      return;
    }
    // An error about no Forward (a ClearSequence or TruncateSequence the worker refused) is reported as what it
    // is, and no job in flight takes the blame.
    if (const auto* e = std::get_if<net::ErrorMsg>(&*msg); e != nullptr && e->request_id == 0) {
      log_warn("{}", e->message);
      continue;
    }
    InFlight job;
    {
      std::lock_guard lock(mutex_);
      if (in_flight_.empty()) {
        if (auto* e = std::get_if<net::ErrorMsg>(&*msg)) log_warn("{}", e->message);
        continue;
      }
      job = std::move(in_flight_.front());
      in_flight_.pop_front();
    }
    StageDone d;
    d.stage = index_;
    d.id = job.id;
    if (auto* r = std::get_if<net::ForwardResult>(&*msg)) {
      try {
        check_result(job, *r, d);
      } catch (const std::exception& e) {
        d.error = e.what();
      }
    } else if (auto* e = std::get_if<net::ErrorMsg>(&*msg)) {
      d.error = e->request_id == job.id ? e->message
                                        : fmt::format("worker {} answered job {} out of order (expected {}): {}", node_,
                                                      e->request_id, job.id, e->message);
    } else {
      d.error = fmt::format("worker {}: unexpected {} message", node_, net::msg_type_name(net::type_of(*msg)));
    }
    done_.push(std::move(d));
  }
}

// A worker's answer is checked against what was asked before the pipeline uses it: the right job, the right
// kind of output, one pick per sampled sequence in order, a logits row per other output token.
void RemoteStageEndpoint::check_result(const InFlight& job, const net::ForwardResult& r, StageDone& d) const {
  if (r.request_id != job.id) fail("worker {} answered job {} out of order (expected {})", node_, r.request_id, job.id);
  if (!last_) {
    if (!r.hidden) fail("worker {}: a result without hidden states", node_);
    d.hidden = net::decode_activations(*r.hidden);
    if (r.hidden->n_cols != static_cast<uint32_t>(out_width_)) {
      fail("worker {}: hidden states of {} values per token, expected {}", node_, r.hidden->n_cols, out_width_);
    }
    return;
  }
  if (r.hidden) fail("worker {}: hidden states from the last stage", node_);
  const size_t rows = r.logits ? r.logits->n_rows : 0;
  if (rows != job.logit_rows || (r.logits && r.logits->n_cols != static_cast<uint32_t>(n_vocab_))) {
    fail("worker {}: {} rows of logits where {} of {} were expected", node_, rows, job.logit_rows, n_vocab_);
  }
  if (r.logits) d.logits = net::decode_activations(*r.logits);
  if (r.sampled.size() != job.sampled_seqs.size()) {
    fail("worker {}: {} sampled tokens where {} were asked for", node_, r.sampled.size(), job.sampled_seqs.size());
  }
  for (size_t i = 0; i < r.sampled.size(); ++i) {
    const net::SampledOutput& o = r.sampled[i];
    if (o.seq != job.sampled_seqs[i] || o.token >= n_vocab_) {
      fail("worker {}: sampled token {} of sequence {} does not answer the request", node_, o.token, o.seq);
    }
    d.sampled.push_back(from_wire(o));
  }
}

void RemoteStageEndpoint::submit(StageJob job) {
  net::Forward f;
  f.request_id = job.id;
  f.seq = job.batch.seq;
  f.pos = job.batch.pos;
  f.want_output = job.batch.want_logits;
  if (first_) {
    f.tokens = job.batch.tokens;
  } else {
    f.activations = net::encode_activations(job.hidden, static_cast<uint32_t>(job.batch.size()),
                                            static_cast<uint32_t>(in_width_), wire_);
  }
  InFlight expect;
  expect.id = job.id;
  if (last_) {
    // The worker answers in batch order of the output tokens: picks for sequences with sampling, logits rows
    // for the others.
    for (int64_t t = 0; t < job.batch.size(); ++t) {
      const auto tt = static_cast<size_t>(t);
      if (!job.batch.want_logits[tt]) continue;
      const int32_t seq = job.batch.seq[tt];
      const bool sampled =
          std::any_of(job.sampling.begin(), job.sampling.end(), [&](const StageSample& s) { return s.seq == seq; });
      if (sampled) {
        expect.sampled_seqs.push_back(seq);
      } else {
        ++expect.logit_rows;
      }
    }
    for (const auto& s : job.sampling) f.sampling.push_back(to_wire(s));
  }
  {
    std::lock_guard lock(mutex_);
    if (!broken_.empty()) {
      StageDone d;
      d.stage = index_;
      d.id = job.id;
      d.error = broken_;
      done_.push(std::move(d));
      return;
    }
    in_flight_.push_back(std::move(expect));
  }
  try {
    conn_->send(f);
  } catch (const Error& e) {
    fail_pending(fmt::format("worker {} lost: {}", node_, e.what()));
  }
}

// broken_ is written by the receiver thread: read under the lock (a copy), never bare.
std::string RemoteStageEndpoint::broken() const {
  std::lock_guard lock(mutex_);
  return broken_;
}

// A link that breaks while sending marks the stage failed, as the receiver would, so the pipeline recovers.
void RemoteStageEndpoint::clear_sequence(int64_t seq) {
  if (const std::string why = broken(); !why.empty()) fail("{}", why);
  try {
    conn_->send(net::ClearSequence{static_cast<int32_t>(seq)});
  } catch (const Error& e) {
    fail_pending(fmt::format("worker {} lost: {}", node_, e.what()));
    throw;
  }
}

void RemoteStageEndpoint::truncate_sequence(int64_t seq, int64_t n) {
  if (const std::string why = broken(); !why.empty()) fail("{}", why);
  try {
    conn_->send(net::TruncateSequence{static_cast<int32_t>(seq), static_cast<int32_t>(n)});
  } catch (const Error& e) {
    fail_pending(fmt::format("worker {} lost: {}", node_, e.what()));
    throw;
  }
}

}  // namespace tessera::cluster
