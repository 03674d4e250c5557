// `tessera serve`'s HTTP side: an OpenAI-compatible API (/v1/chat/completions, /v1/completions, /v1/models),
// /health, /metrics and the web page at /, over the replicas of one model. cpp-httplib stays out of this header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "model/model_config.h"
#include "server/http_limits.h"
#include "server/openai_api.h"
#include "server/replica.h"
#include "tokenizer/chat_format.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                           // 0: any free port (start() returns it)
  std::string api_key;                       // empty: no key needed; else /v1/* needs "Authorization: Bearer <key>"
  std::vector<std::string> allowed_origins;  // browser origins besides the server's own page ("*": any)
  size_t max_body_bytes = 1 << 20;           // larger request bodies get 413
  int http_threads = 64;                     // connections served at once (streams hold one each)
  int retry_after_seconds = 1;               // the Retry-After of 503 answers
  HttpLimits http_limits;                    // deadlines and caps of the HTTP front (body_bytes: max_body_bytes)
  RequestLimits limits;
  SamplerParams sampler;    // defaults for the sampling fields a request leaves out
  int32_t max_tokens = -1;  // default max_tokens (-1: until end of generation or a full context)
  std::string tool_format;  // how the model writes tool calls (chat::tool_family_from_name); "": from the template
};

// The model the server presents: one model, however many replicas run it.
struct ServedModel {
  std::string id;  // the name /v1/models lists and requests may give as "model"
  std::shared_ptr<const Tokenizer> tokenizer;
  ChatFormat chat_format;  // the model's Jinja template, a --chat-template file or a named format (chatml default)
  ModelConfig config;
  int64_t n_ctx = 0;    // positions per sequence
  int64_t created = 0;  // unix seconds (the file's modification time)
};

class Server {
 public:
  Server(ServerOptions options, ServedModel model);
  // Stops serving: running requests are cancelled, the listening thread joined, then the replicas stopped.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and starts answering (health says "loading" until set_ready); returns the port. Throws Error.
  int start();
  // Adds a replica (thread safe); it takes requests at once.
  void add_replica(ReplicaSpec spec, const SchedulerOptions& options);
  void set_ready();
  // Loading failed: health says so, generation requests get 503.
  void set_failed(const std::string& why);
  void stop();

  const ServerOptions& options() const;
  const ServedModel& model() const;
  Router& router();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::server
