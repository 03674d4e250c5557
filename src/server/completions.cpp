// POST /v1/chat/completions and /v1/completions: validate, render the chat template, tokenize, route to a replica,
// then either wait for the whole answer or stream it as server-sent events. The handler thread only waits on
// the request's channel; a client that goes away cancels its request, which frees the sequence's cache slot.
#include <condition_variable>
#include <deque>

#include "server/chat_output.h"
#include "server/client_socket.h"
#include "server/server_impl.h"
#include "server/sse.h"
#include "util/log.h"

namespace tessera::server {

using nlohmann::json;

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);  // how often a waiting handler looks at its client

// What the scheduler thread hands to the waiting handler thread.
class Channel {
 public:
  SequenceCallbacks callbacks(const std::shared_ptr<Channel>& self) {
    return {[self](const SequenceDelta& d) { self->push(d); }, [self](const SequenceResult& r) { self->finish(r); }};
  }
  // Waits up to `timeout` for news; moves out what arrived.
  void wait(std::chrono::milliseconds timeout, std::vector<SequenceDelta>& deltas,
            std::optional<SequenceResult>& result) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, timeout, [&] { return !deltas_.empty() || result_.has_value(); });
    deltas.assign(std::make_move_iterator(deltas_.begin()), std::make_move_iterator(deltas_.end()));
    deltas_.clear();
    if (result_) result = std::move(result_);
    result_.reset();
  }

 private:
  void push(const SequenceDelta& d) {
    {
      std::lock_guard lock(mutex_);
      deltas_.push_back(d);
    }
    cv_.notify_one();
  }
  void finish(const SequenceResult& r) {
    {
      std::lock_guard lock(mutex_);
      result_ = r;
    }
    cv_.notify_one();
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<SequenceDelta> deltas_;
  std::optional<SequenceResult> result_;
};

// One request from parsing to its last byte.
struct Job {
  Server::Impl* server = nullptr;
  CompletionRequest request;
  ResponseMeta meta;
  std::string echo;  // completions with echo: the prompt text, sent first
  int64_t n_prompt = 0;
  std::shared_ptr<Channel> channel = std::make_shared<Channel>();
  std::shared_ptr<SequenceHandle> handle;
  std::unique_ptr<ClientSocket> client;
  // Streaming progress.
  bool sent_role = false;
  bool finished = false;
  std::string text;  // everything generated (non-streaming answers)
  std::vector<TokenLogprobs> logprobs;
  // Chat output read for tool calls and reasoning (absent: the text is the content as generated).
  chat::OutputFormat format;
  std::optional<ChatOutput> output;

  ~Job() {
    if (handle && !finished) handle->cancel();
  }

  TokenLogprobs token_logprobs(const SampledToken& t) const {
    const Tokenizer& tok = *server->model.tokenizer;
    TokenLogprobs out{tok.token_to_piece(t.token), t.logprob, {}};
    for (const auto& alt : t.top) out.top.emplace_back(tok.token_to_piece(alt.token), alt.logprob);
    return out;
  }
  bool chat() const { return request.endpoint == Endpoint::Chat; }
  json logprobs_json(const std::vector<TokenLogprobs>& lp, size_t offset) const {
    if (request.logprobs < 0) return nullptr;
    return chat() ? chat_logprobs_json(lp) : completion_logprobs_json(lp, offset);
  }
  bool gone() const { return server->stopping.load() || (client && client->closed()); }
};

std::vector<TokenId> tokenize(Job& job, bool& strip_leading_space) {
  const ServedModel& m = job.server->model;
  const Tokenizer& tok = *m.tokenizer;
  const CompletionRequest& r = job.request;
  strip_leading_space = false;
  if (r.endpoint == Endpoint::Chat) {
    // The template's variables: chat_template_kwargs and reasoning_effort, then what the server sets.
    nlohmann::ordered_json context = r.template_vars;
    context["messages"] = r.chat_messages;
    if (r.tools.offered()) context["tools"] = r.tools.tools;
    context["add_generation_prompt"] = true;
    std::string rendered;
    try {
      rendered = m.chat_format.prompt(context);
    } catch (const Error& e) {
      throw ApiError(400, e.what(), "invalid_request_error", "messages");
    }
    job.format = output_format(job.server->template_format, r.tools, rendered, job.server->options.tool_format);
    if (parses_output(job.format)) job.output.emplace(job.format);
    return tok.encode(rendered, true, true);
  }
  if (r.prompt_is_tokens) {
    for (TokenId t : r.prompt_tokens) {
      if (t >= tok.n_vocab())
        invalid_param("prompt", "Token id {} is outside the vocabulary of {} tokens.", t, tok.n_vocab());
    }
    if (r.echo) job.echo = tok.decode(r.prompt_tokens);
    return r.prompt_tokens;
  }
  if (r.echo) job.echo = r.prompt;
  auto tokens = tok.encode(r.prompt, true, true);
  if (tokens.empty()) {
    if (tok.bos() < 0)
      invalid_param("prompt", "The prompt is empty and the vocabulary has no BOS token to start from.");
    tokens.push_back(tok.bos());
  }
  // As `tessera run` does: an output that starts the text has no leading space of its own.
  strip_leading_space = r.prompt.empty() && tok.vocab().add_space_prefix();
  return tokens;
}

SequenceRequest build(Job& job) {
  const Server::Impl& s = *job.server;
  const CompletionRequest& r = job.request;
  if (!r.model.empty() && r.model != s.model.id) {
    throw ApiError(404, fmt::format("The model '{}' does not exist or you do not have access to it.", r.model),
                   "invalid_request_error", "model", "model_not_found");
  }
  SequenceRequest q;
  q.prompt = tokenize(job, q.strip_leading_space);
  job.n_prompt = static_cast<int64_t>(q.prompt.size());
  if (job.n_prompt > s.model.n_ctx) {
    throw ApiError(400,
                   fmt::format("This model's maximum context length is {} tokens. However, your {} resulted in {} "
                               "tokens. Please reduce the length of the {}.",
                               s.model.n_ctx, job.chat() ? "messages" : "prompt", job.n_prompt,
                               job.chat() ? "messages" : "prompt"),
                   "invalid_request_error", job.chat() ? "messages" : "prompt", "context_length_exceeded");
  }
  q.sampler = merge_sampler(r, s.options.sampler);
  q.max_tokens = r.max_tokens.value_or(s.options.max_tokens);
  q.stop = r.stop;
  q.ignore_eos = r.ignore_eos;
  q.logprobs = r.logprobs;
  q.grammar = r.grammar.text;
  q.compiled_grammar = r.grammar.compiled;
  if (job.chat() && r.tools.forced()) {
    const OutputGrammar g = forced_tool_grammar(r.tools, job.format, s.model.chat_format.source());
    q.grammar = g.text;
    q.compiled_grammar = g.compiled;
  }
  q.render_special = job.output.has_value();
  return q;
}

void submit(Job& job, const SequenceRequest& q) {
  Server::Impl& s = *job.server;
  const ServeState state = s.state.load();
  if (state != ServeState::Ready || s.router.size() == 0) {
    throw ApiError(503,
                   state == ServeState::Failed ? "The model failed to load; see the server's log."
                                               : "The model is still loading. Please retry shortly.",
                   "server_error", {}, state == ServeState::Failed ? "model_failed" : "model_loading");
  }
  Router::Routed routed;
  try {
    routed = s.router.submit(q, job.channel->callbacks(job.channel));
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "invalid_request_error");
  }
  if (!routed.handle) {
    s.metrics.record_rejected();
    throw ApiError(503, "The server is busy: every request queue is full. Please retry shortly.", "server_error", {},
                   "queue_full");
  }
  job.handle = std::move(routed.handle);
}

void record(Job& job, const SequenceResult& r) {
  job.server->metrics.record_generation(r.first_token_seconds, r.total_seconds, !r.tokens.empty());
}

Usage usage_of(const Job& job, const SequenceResult& r) {
  return {job.n_prompt, static_cast<int64_t>(r.tokens.size())};
}

void respond_whole(Job& job, httplib::Response& res) {
  std::vector<SequenceDelta> deltas;
  std::optional<SequenceResult> result;
  for (;;) {
    job.channel->wait(kPoll, deltas, result);
    for (const auto& d : deltas) {
      job.text += d.text;
      if (d.logprobs) job.logprobs.push_back(job.token_logprobs(*d.logprobs));
    }
    if (result) break;
    if (job.gone()) {
      // Nobody will read the answer: free the slot now (Job's destructor cancels).
      res.status = 499;
      return;
    }
  }
  job.finished = true;
  record(job, *result);
  if (result->reason == FinishReason::Error) {
    // The request's id in the message and the log, so that a client's report finds the server's line.
    log_warn("serve: request {} failed: {}", job.meta.id, result->error);
    send_error(res, ApiError(500, fmt::format("Generation failed (request {}): {}", job.meta.id, result->error),
                             "server_error"));
    return;
  }
  if (result->reason == FinishReason::Cancelled) {
    send_error(res, ApiError(503, "The request was cancelled: the server is shutting down.", "server_error"),
               job.server->options.retry_after_seconds);
    return;
  }
  const Usage usage = usage_of(job, *result);
  std::string_view finish = finish_reason_text(result->reason);
  const json lp = job.logprobs_json(job.logprobs, job.echo.size());
  if (job.output) {
    const json message = job.output->message(job.text);
    if (job.output->made_calls() && finish == "stop") finish = "tool_calls";
    send_json(res, 200, chat_message_response_json(job.meta, message, finish, usage, lp));
    return;
  }
  send_json(res, 200,
            job.chat() ? chat_response_json(job.meta, job.text, finish, usage, lp)
                       : completion_response_json(job.meta, job.echo + job.text, finish, usage, lp));
}

// Called by httplib's writer loop until it returns false or calls sink.done(); each call waits at most kPoll.
bool stream_step(Job& job, httplib::DataSink& sink) {
  std::string out;
  auto event = [&](const json& j) { out += sse_event(dump(j)); };
  if (!job.sent_role) {
    job.sent_role = true;
    if (job.chat()) {
      event(chat_chunk_json(job.meta, "assistant", "", "", nullptr));
    } else if (!job.echo.empty()) {
      event(completion_chunk_json(job.meta, job.echo, "", nullptr));
    }
  }
  std::vector<SequenceDelta> deltas;
  std::optional<SequenceResult> result;
  job.channel->wait(kPoll, deltas, result);
  size_t offset = job.echo.size() + job.text.size();
  for (const auto& d : deltas) {
    std::vector<TokenLogprobs> lp;
    if (d.logprobs) lp.push_back(job.token_logprobs(*d.logprobs));
    if (d.text.empty() && lp.empty()) continue;
    const json lpj = job.logprobs_json(lp, offset);
    if (job.output) {
      // Parsed output: each delta object its own chunk; the token's logprobs ride on the first (or an empty one).
      auto pieces = job.output->push(d.text);
      if (pieces.empty() && !lpj.is_null()) pieces.push_back(json::object());
      for (size_t k = 0; k < pieces.size(); ++k) {
        event(chat_delta_chunk_json(job.meta, pieces[k], "", k == 0 ? lpj : json(nullptr)));
      }
    } else {
      event(job.chat() ? chat_chunk_json(job.meta, "", d.text, "", lpj)
                       : completion_chunk_json(job.meta, d.text, "", lpj));
    }
    job.text += d.text;
    offset += d.text.size();
  }
  if (result) {
    job.finished = true;
    record(job, *result);
    if (result->reason == FinishReason::Error || result->reason == FinishReason::Cancelled) {
      // The status line is long gone: the error travels as an event, as OpenAI's streams do.
      const bool error = result->reason == FinishReason::Error;
      if (error) log_warn("serve: request {} failed: {}", job.meta.id, result->error);
      event(error_json(error ? fmt::format("Generation failed (request {}): {}", job.meta.id, result->error)
                             : std::string("The request was cancelled: the server is shutting down."),
                       "server_error"));
    } else {
      std::string_view finish = finish_reason_text(result->reason);
      if (job.output) {
        for (const auto& piece : job.output->finish()) event(chat_delta_chunk_json(job.meta, piece, "", nullptr));
        if (job.output->made_calls() && finish == "stop") finish = "tool_calls";
      }
      event(job.chat() ? chat_chunk_json(job.meta, "", "", finish, nullptr)
                       : completion_chunk_json(job.meta, "", finish, nullptr));
      if (job.request.include_usage) event(usage_chunk_json(job.meta, job.request.endpoint, usage_of(job, *result)));
    }
    out += kSseDone;
  }
  if (!out.empty() && !sink.write(out.data(), out.size())) return false;  // the client went away
  if (result) {
    sink.done();
    return true;
  }
  return !job.gone();
}

}  // namespace

void handle_generation(Server::Impl& s, const httplib::Request& req, const std::string& body, httplib::Response& res,
                       Endpoint endpoint) {
  auto job = std::make_shared<Job>();
  job->server = &s;
  try {
    job->request = parse_completion_request(body, endpoint, s.options.limits);
    job->meta = {
        s.new_id(endpoint == Endpoint::Chat ? "chatcmpl" : "cmpl"),
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(),
        s.model.id};
    const SequenceRequest q = build(*job);
    submit(*job, q);
  } catch (const ApiError& e) {
    send_error(res, e, s.options.retry_after_seconds);
    return;
  } catch (const Error& e) {
    send_error(res, ApiError(400, e.what()));
    return;
  }
  job->client = std::make_unique<ClientSocket>(req);
  if (!job->request.stream) {
    respond_whole(*job, res);
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider("text/event-stream", [job](size_t, httplib::DataSink& sink) {
    try {
      return stream_step(*job, sink);
    } catch (const std::exception& e) {
      log_warn("serve: streaming failed: {}", e.what());
      return false;
    }
  });
  // The provider holds the last reference to the job: however the response ends, destroying it cancels a
  // request still running (Job's destructor).
}

}  // namespace tessera::server
