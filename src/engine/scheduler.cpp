// Scheduler: each step is one Batch with the pending token of every decoding sequence plus prompt chunks of newly
// admitted ones; sampling, stop strings and streaming follow Generator exactly, so a request's output does not
// depend on what else shares its batches.
#include "engine/scheduler.h"

#include <algorithm>
#include <optional>

#include "engine/grammar_vocab.h"
#include "engine/stop_strings.h"
#include "grammar/constraint.h"
#include "grammar/parser.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::EndOfGeneration:
      return "end of generation";
    case FinishReason::StopString:
      return "stop string";
    case FinishReason::Length:
      return "token limit";
    case FinishReason::ContextFull:
      return "context full";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Error:
      return "error";
  }
  return "";
}

struct Scheduler::Sequence {
  Sequence(SequenceRequest r, SequenceCallbacks cb, const Tokenizer& tok, int32_t n_vocab)
      : request(std::move(r)),
        callbacks(std::move(cb)),
        sampler(request.sampler, n_vocab),
        decoder(tok, request.render_special),
        filter(request.stop),
        strip(request.strip_leading_space) {}

  std::shared_ptr<SequenceHandle> handle = std::make_shared<SequenceHandle>();
  SequenceRequest request;
  SequenceCallbacks callbacks;
  Sampler sampler;
  StreamDecoder decoder;
  StopStringFilter filter;
  bool strip;
  SequenceResult result;
  Clock::time_point submitted = Clock::now();
  int64_t slot = -1;
  int64_t n_past = 0;      // positions in the cache
  size_t n_prefilled = 0;  // prompt tokens evaluated
  TokenId pending = -1;    // sampled and streamed, to be evaluated at the next step
  bool in_flight = false;  // part of a step not yet back: nothing may touch its slot or sampler
  bool done = false;
  int moves = 0;                 // times it moved to another scheduler
  std::vector<TokenId> resumed;  // after a move: the prompt plus every token generated before it

  // The tokens to prefill: the prompt, or after a move everything the cache held (and the pending token).
  const std::vector<TokenId>& input() const { return resumed.empty() ? request.prompt : resumed; }
};

namespace {
// A request that fails wherever it goes (an error that is its own, not a node's) ends after this many moves.
constexpr int kMaxMoves = 3;
}  // namespace

Scheduler::Scheduler(Executor& executor, const Tokenizer& tokenizer, SchedulerOptions options)
    : executor_(executor), tokenizer_(tokenizer), options_(options) {
  if (options_.n_parallel <= 0) options_.n_parallel = executor_.n_slots();
  if (options_.n_parallel > executor_.n_slots()) {
    fail("{} parallel sequences need as many cache slots, but the executor has {}", options_.n_parallel,
         executor_.n_slots());
  }
  if (options_.max_queue < 0) fail("the queue limit must be >= 0, got {}", options_.max_queue);
  if (options_.prefill_chunk <= 0) fail("the prefill chunk must be positive, got {}", options_.prefill_chunk);
  // Every decoding sequence needs its token in each batch.
  options_.max_batch_tokens = std::max(options_.max_batch_tokens, options_.n_parallel);
  if (tokenizer_.n_vocab() != executor_.config().n_vocab) {
    fail("the tokenizer has {} tokens but the model's vocabulary is {}", tokenizer_.n_vocab(),
         executor_.config().n_vocab);
  }
  for (int64_t s = options_.n_parallel - 1; s >= 0; --s) {
    executor_.clear_sequence(s);
    free_slots_.push_back(s);
  }
  lanes_.resize(static_cast<size_t>(std::clamp<int64_t>(executor_.lanes(), 1, options_.n_parallel)));
  totals_.n_parallel = options_.n_parallel;
  totals_.max_queue = options_.max_queue;
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<SequenceHandle> Scheduler::submit(SequenceRequest request, SequenceCallbacks callbacks) {
  const int64_t n_ctx = executor_.n_ctx();
  if (request.prompt.empty()) fail("the prompt is empty: nothing to continue from (a BOS token at least is needed)");
  if (static_cast<int64_t>(request.prompt.size()) > n_ctx) {
    fail("the prompt of {} tokens does not fit the context of {} tokens", request.prompt.size(), n_ctx);
  }
  const auto n_vocab = static_cast<TokenId>(executor_.config().n_vocab);
  for (TokenId t : request.prompt) {
    if (t < 0 || t >= n_vocab) fail("token id {} is outside the vocabulary of {} tokens", t, n_vocab);
  }
  if (request.logprobs > n_vocab) request.logprobs = n_vocab;
  auto s = std::make_unique<Sequence>(std::move(request), std::move(callbacks), tokenizer_, n_vocab);
  for (TokenId t : s->request.prompt) s->sampler.accept(t, false);
  if (!s->request.grammar.empty()) {
    if (!s->request.compiled_grammar) {
      s->request.compiled_grammar = std::make_shared<grammar::Grammar>(grammar::parse_grammar(s->request.grammar));
    }
    std::call_once(trie_once_, [this] { trie_ = make_token_trie(tokenizer_); });
    s->sampler.set_grammar(s->request.grammar,
                           std::make_shared<grammar::TokenConstraint>(s->request.compiled_grammar, trie_));
  }
  s->result.n_prompt = static_cast<int64_t>(s->request.prompt.size());
  auto handle = s->handle;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) fail("the server is shutting down");
    const int64_t free = options_.n_parallel - n_active_;
    if (static_cast<int64_t>(queue_.size()) >= options_.max_queue + std::max<int64_t>(free, 0)) {
      std::lock_guard stats_lock(stats_mutex_);
      ++totals_.rejected;
      return nullptr;
    }
    queue_.push_back(std::move(s));
    std::lock_guard stats_lock(stats_mutex_);
    ++totals_.accepted;
  }
  wake_.notify_one();
  return handle;
}

void Scheduler::set_mover(Mover mover) {
  std::lock_guard lock(mutex_);
  mover_ = std::move(mover);
}

bool Scheduler::adopt(std::unique_ptr<Sequence>& s) {
  if (!s || static_cast<int64_t>(s->input().size()) > executor_.n_ctx()) return false;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    queue_.push_front(std::move(s));  // it was running: ahead of requests that have waited for nothing yet
    std::lock_guard stats_lock(stats_mutex_);
    ++totals_.moved_in;
  }
  wake_.notify_one();
  return true;
}

double Scheduler::load() const {
  std::lock_guard lock(mutex_);
  return static_cast<double>(n_active_ + static_cast<int64_t>(queue_.size())) /
         static_cast<double>(options_.n_parallel);
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats out;
  {
    std::lock_guard lock(mutex_);
    out.active = n_active_;
    out.queued = static_cast<int64_t>(queue_.size());
  }
  std::lock_guard lock(stats_mutex_);
  const int64_t active = out.active;
  const int64_t queued = out.queued;
  out = totals_;
  out.active = active;
  out.queued = queued;
  const auto now = Clock::now();
  const double span = std::min(options_.stats_window_seconds, std::chrono::duration<double>(now - started_).count());
  int64_t prompt = 0;
  int64_t decode = 0;
  double seconds = 0;
  int64_t n = 0;
  for (const auto& r : window_) {
    if (std::chrono::duration<double>(now - r.end).count() > options_.stats_window_seconds) continue;
    prompt += r.prompt_tokens;
    decode += r.sampled_tokens;
    seconds += r.seconds;
    ++n;
  }
  if (span > 0) {
    out.prompt_tokens_per_second = static_cast<double>(prompt) / span;
    out.decode_tokens_per_second = static_cast<double>(decode) / span;
  }
  out.mean_step_seconds = n > 0 ? seconds / static_cast<double>(n) : 0.0;
  return out;
}

bool Scheduler::any_busy() const {
  return std::any_of(lanes_.begin(), lanes_.end(), [](const Lane& l) { return l.busy; });
}

void Scheduler::loop() {
  for (;;) {
    std::vector<std::unique_ptr<Sequence>> dropped;
    std::vector<std::unique_ptr<Sequence>> admitted;
    const bool busy = any_busy();
    {
      std::unique_lock lock(mutex_);
      // Idle for a second: the executor may repair a failed node before a request needs it.
      if (!wake_.wait_for(lock, std::chrono::seconds(1),
                          [&] { return stopping_ || busy || !queue_.empty() || !active_.empty(); })) {
        lock.unlock();
        try {
          executor_.heal();
        } catch (const std::exception& e) {
          log_warn("scheduler: repairing the executor failed: {}", e.what());
        }
        continue;
      }
      if (stopping_) break;
      for (auto it = queue_.begin(); it != queue_.end();) {
        if ((*it)->handle->cancelled()) {
          dropped.push_back(std::move(*it));
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      while (!queue_.empty() && static_cast<int64_t>(active_.size() + admitted.size()) < options_.n_parallel) {
        admitted.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      n_active_ = static_cast<int64_t>(active_.size() + admitted.size());
    }
    for (auto& s : dropped) finish(*s, FinishReason::Cancelled);
    for (auto& s : admitted) admit(std::move(s));
    for (Lane& lane : lanes_) {
      if (!lane.busy) launch(lane);
    }
    if (!any_busy()) continue;
    StepResult result;
    try {
      result = executor_.collect_step();
    } catch (const std::exception& e) {
      // Nothing a request does may take the scheduler down: end what is running, keep serving.
      log_warn("scheduler: collecting a step failed: {}", e.what());
      for (Lane& lane : lanes_) {
        if (lane.busy) fail_lane(lane, e.what());
      }
      continue;
    }
    auto lane =
        std::find_if(lanes_.begin(), lanes_.end(), [&](const Lane& l) { return l.busy && l.ticket == result.ticket; });
    if (lane == lanes_.end()) {
      log_warn("scheduler: the executor returned step {}, which is not in flight", result.ticket);
      continue;
    }
    land(*lane, result);
  }
  drain();
  // Shutting down: nothing may be left without its on_done.
  std::deque<std::unique_ptr<Sequence>> queued;
  {
    std::lock_guard lock(mutex_);
    queued.swap(queue_);
  }
  for (auto& s : queued) finish(*s, FinishReason::Cancelled);
  for (auto& s : active_) {
    if (!s->done) finish(*s, FinishReason::Cancelled);
  }
  active_.clear();
}

void Scheduler::drain() {
  // What the steps computed is dropped: their requests end as cancelled, like every other one at shutdown.
  const auto release = [](Lane& lane) {
    lane.busy = false;
    for (Sequence* s : lane.decoding) s->in_flight = false;
    for (auto& [s, n] : lane.chunks) s->in_flight = false;
  };
  while (any_busy()) {
    try {
      const StepResult r = executor_.collect_step();
      for (Lane& lane : lanes_) {
        if (lane.busy && lane.ticket == r.ticket) release(lane);
      }
    } catch (const std::exception& e) {
      log_warn("scheduler: collecting a step failed while stopping: {}", e.what());
      for (Lane& lane : lanes_) release(lane);
    }
  }
}

void Scheduler::admit(std::unique_ptr<Sequence> s) {
  s->slot = free_slots_.back();
  free_slots_.pop_back();
  if (s->moves == 0) s->result.queue_seconds = std::chrono::duration<double>(Clock::now() - s->submitted).count();
  active_.push_back(std::move(s));
  Sequence& seq = *active_.back();
  if (seq.request.max_tokens == 0) finish(seq, FinishReason::Length);
}

void Scheduler::launch(Lane& lane) {
  for (auto& s : active_) {
    if (!s->done && !s->in_flight && s->handle->cancelled()) finish(*s, FinishReason::Cancelled);
  }
  retire();
  // Each lane takes its share of the sequences not in flight, so groups stay even as requests come and go.
  const auto n_live = static_cast<int64_t>(active_.size());
  const auto n_lanes = static_cast<int64_t>(lanes_.size());
  const int64_t quota = (n_live + n_lanes - 1) / n_lanes;
  int64_t taken = 0;

  batch_.clear();
  lane.decoding.clear();
  lane.wants.clear();
  lane.chunks.clear();
  for (auto& s : active_) {
    if (taken == quota) break;
    if (s->in_flight || s->pending < 0) continue;
    batch_.add(s->pending, static_cast<int32_t>(s->slot), static_cast<int32_t>(s->n_past), true);
    lane.decoding.push_back(s.get());
    lane.wants.push_back(s.get());
    ++taken;
  }
  const auto n_decode = static_cast<int64_t>(lane.decoding.size());
  int64_t budget = options_.max_batch_tokens - n_decode;
  if (n_decode > 0) budget = std::min(budget, options_.prefill_chunk);
  int64_t n_prompt = 0;
  for (auto& s : active_) {
    const auto& prompt = s->input();
    if (budget <= 0 || taken == quota) break;
    if (s->in_flight || s->n_prefilled >= prompt.size()) continue;
    const auto n = std::min<size_t>(prompt.size() - s->n_prefilled, static_cast<size_t>(budget));
    for (size_t i = 0; i < n; ++i) {
      const size_t k = s->n_prefilled + i;
      const bool last = k + 1 == prompt.size();
      batch_.add(prompt[k], static_cast<int32_t>(s->slot), static_cast<int32_t>(s->n_past + static_cast<int64_t>(i)),
                 last);
      if (last) lane.wants.push_back(s.get());
    }
    lane.chunks.emplace_back(s.get(), n);
    budget -= static_cast<int64_t>(n);
    n_prompt += static_cast<int64_t>(n);
    ++taken;
  }
  if (batch_.empty()) return;

  // Sampling happens where the output head is (a pipeline's last stage), so only token ids come back.
  std::vector<SampleRequest> requests;
  requests.reserve(lane.wants.size());
  for (Sequence* s : lane.wants) requests.push_back({&s->sampler, s->request.logprobs});
  lane.start = Clock::now();
  lane.n_prompt = n_prompt;
  for (Sequence* s : lane.decoding) s->in_flight = true;
  for (auto& [s, n] : lane.chunks) s->in_flight = true;
  lane.busy = true;
  try {
    lane.ticket = executor_.submit_step(batch_, requests);
  } catch (const std::exception& e) {
    fail_lane(lane, e.what());
  }
}

// The step failed: the executor left its sequences as they were before it, but a remote executor may have lost
// state. Each moves to another scheduler when a mover finds one (it continues there), or ends with the error.
void Scheduler::fail_lane(Lane& lane, const std::string& error) {
  log_warn("scheduler: forward pass failed: {}", error);
  lane.busy = false;
  // Every sequence of the step once: those that sample are among those that put tokens in it.
  std::vector<Sequence*> hit(lane.decoding.begin(), lane.decoding.end());
  for (auto& [s, n] : lane.chunks) hit.push_back(s);
  std::sort(hit.begin(), hit.end());
  hit.erase(std::unique(hit.begin(), hit.end()), hit.end());
  for (Sequence* s : hit) s->in_flight = false;
  record_step(lane.start, 0, 0, false, error);
  bool tried = false;
  {
    std::lock_guard lock(mutex_);
    tried = static_cast<bool>(mover_);
  }
  for (Sequence* s : hit) {
    if (move_elsewhere(*s)) continue;  // s belongs to another scheduler now: not touched again
    finish(*s, FinishReason::Error,
           tried && !s->done && !s->handle->cancelled()
               ? fmt::format("{} (and no other replica could take the request over)", error)
               : error);
  }
  retire();
}

bool Scheduler::move_elsewhere(Sequence& s) {
  Mover mover;
  {
    std::lock_guard lock(mutex_);
    mover = mover_;
  }
  if (!mover || s.done || s.handle->cancelled() || s.moves >= kMaxMoves) return false;
  const auto at = std::find_if(active_.begin(), active_.end(), [&](const auto& p) { return p.get() == &s; });
  if (at == active_.end()) return false;
  // What the client has seen stays as it is (stream decoder, stop filter, result so far); the new scheduler
  // rebuilds the cache from the prompt and the generated tokens, the last of which was pending (sampled, streamed,
  // not yet evaluated) or, if none is pending, the prompt was still being prefilled.
  const int64_t slot = s.slot;
  if (!s.result.tokens.empty()) {
    s.resumed = s.request.prompt;
    s.resumed.insert(s.resumed.end(), s.result.tokens.begin(), s.result.tokens.end());
  }
  s.slot = -1;
  s.n_past = 0;
  s.n_prefilled = 0;
  s.pending = -1;
  ++s.moves;
  std::unique_ptr<Sequence> own = std::move(*at);
  if (!mover(own)) {
    *at = std::move(own);
    s.slot = slot;
    return false;
  }
  // Taken: it may already run on the other scheduler's thread, so only this scheduler's slot is touched now.
  try {
    executor_.clear_sequence(slot);
  } catch (const std::exception& e) {
    log_warn("scheduler: clearing slot {} of a moved request: {}", slot, e.what());
  }
  free_slots_.push_back(slot);
  {
    std::lock_guard lock(mutex_);
    --n_active_;
  }
  std::lock_guard lock(stats_mutex_);
  ++totals_.moved_out;
  return true;
}

void Scheduler::land(Lane& lane, StepResult& result) {
  if (!result.error.empty()) {
    fail_lane(lane, result.error);
    return;
  }
  if (result.sampled.size() != lane.wants.size()) {
    fail_lane(lane, fmt::format("the executor returned {} tokens for a step that samples {}", result.sampled.size(),
                                lane.wants.size()));
    return;
  }
  lane.busy = false;
  // Every token of the step is now in its sequence's cache.
  for (Sequence* s : lane.decoding) {
    s->in_flight = false;
    ++s->n_past;
    s->pending = -1;
  }
  for (auto& [s, n] : lane.chunks) {
    s->in_flight = false;
    s->n_past += static_cast<int64_t>(n);
    s->n_prefilled += n;
  }
  // Each sequence with an output took exactly one token below. The figures are recorded first: a request's
  // on_done may fire while sampling, and whoever it wakes must already see this step in stats().
  std::vector<size_t> rows;
  for (size_t row = 0; row < lane.wants.size(); ++row) {
    if (!lane.wants[row]->done && !lane.wants[row]->handle->cancelled()) rows.push_back(row);
  }
  record_step(lane.start, lane.n_prompt, static_cast<int64_t>(rows.size()), true, {});
  for (size_t row : rows) take(*lane.wants[row], result.sampled[row]);
  retire();
}

void Scheduler::retire() {
  std::erase_if(active_, [](const std::unique_ptr<Sequence>& s) { return !s || s->done; });
  std::lock_guard lock(mutex_);
  n_active_ = static_cast<int64_t>(active_.size());
}

void Scheduler::take(Sequence& s, SampledToken& picked) {
  SequenceDelta delta;
  delta.token = picked.token;
  if (s.request.logprobs >= 0) delta.logprobs = std::move(picked);
  const TokenId token = delta.token;
  try {
    s.sampler.accept(token);
  } catch (const Error& e) {
    finish(s, FinishReason::Error, e.what());  // a grammar that rejects its own pick: a bug, not a crash
    return;
  }
  s.result.tokens.push_back(token);
  if (s.result.tokens.size() == 1) {
    s.result.first_token_seconds = std::chrono::duration<double>(Clock::now() - s.submitted).count();
  }
  if (!s.request.ignore_eos && tokenizer_.is_eog(token)) {
    finish(s, FinishReason::EndOfGeneration);
    return;
  }
  delta.text = s.filter.push(s.decoder.push(token));
  emit(s, delta);
  if (s.done) return;  // the callback failed
  const auto n_generated = static_cast<int64_t>(s.result.tokens.size());
  if (s.filter.stopped()) {
    finish(s, FinishReason::StopString);
  } else if (s.request.max_tokens >= 0 && n_generated >= s.request.max_tokens) {
    finish(s, FinishReason::Length);
  } else if (s.n_past >= executor_.n_ctx()) {
    finish(s, FinishReason::ContextFull);
  } else {
    s.pending = token;
  }
}

void Scheduler::emit(Sequence& s, SequenceDelta& delta) {
  if (s.strip && !delta.text.empty()) {
    if (delta.text.front() == ' ') delta.text.erase(0, 1);
    s.strip = false;
  }
  if (delta.text.empty() && delta.token < 0) return;
  s.result.text += delta.text;
  if (!s.callbacks.on_delta) return;
  try {
    s.callbacks.on_delta(delta);
  } catch (const std::exception& e) {
    finish(s, FinishReason::Error, fmt::format("streaming the output failed: {}", e.what()));
  }
}

void Scheduler::finish(Sequence& s, FinishReason reason, std::string error) {
  if (s.done) return;
  if (reason != FinishReason::Cancelled && reason != FinishReason::Error && !s.filter.stopped()) {
    SequenceDelta tail;
    tail.text = s.filter.push(s.decoder.flush()) + s.filter.flush();
    emit(s, tail);
    if (s.done) return;
  }
  s.done = true;
  s.result.reason = reason;
  s.result.error = std::move(error);
  s.result.total_seconds = std::chrono::duration<double>(Clock::now() - s.submitted).count();
  if (s.slot >= 0) {
    executor_.clear_sequence(s.slot);
    free_slots_.push_back(s.slot);
    s.slot = -1;
    // Before on_done: whoever it wakes must not see the request still active in stats() or load().
    std::lock_guard lock(mutex_);
    --n_active_;
  }
  {
    std::lock_guard lock(stats_mutex_);
    ++totals_.finished[static_cast<size_t>(reason)];
  }
  if (s.callbacks.on_done) {
    try {
      s.callbacks.on_done(s.result);
    } catch (const std::exception& e) {
      log_warn("scheduler: a request's completion callback failed: {}", e.what());
    }
  }
}

void Scheduler::record_step(Clock::time_point start, int64_t prompt_tokens, int64_t sampled_tokens, bool ok,
                            const std::string& error) {
  const auto end = Clock::now();
  const double seconds = std::chrono::duration<double>(end - start).count();
  std::lock_guard lock(stats_mutex_);
  ++totals_.steps;
  totals_.busy_seconds += seconds;
  totals_.last_step_seconds = seconds;
  if (!ok) {
    ++totals_.failed_steps;
    ++totals_.consecutive_failures;
    totals_.last_error = error;
    return;
  }
  totals_.consecutive_failures = 0;
  totals_.prompt_tokens += static_cast<uint64_t>(prompt_tokens);
  totals_.generated_tokens += static_cast<uint64_t>(sampled_tokens);
  window_.push_back({end, prompt_tokens, sampled_tokens, seconds});
  while (!window_.empty() &&
         std::chrono::duration<double>(end - window_.front().end).count() > options_.stats_window_seconds) {
    window_.pop_front();
  }
}

}  // namespace tessera
