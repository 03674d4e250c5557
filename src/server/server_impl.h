// The server's state shared by its source files (routes in http_server.cpp, generation in completions.cpp).
// Internal to src/server.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "chat/derived.h"
#include "server/http_front.h"
#include "server/http_server.h"
#include "server/metrics.h"

namespace tessera::server {

enum class ServeState { Loading, Ready, Failed };

// httplib's router and handlers, driven by the HttpFront one complete request at a time.
class RoutedServer : public httplib::Server {
 public:
  RoutedServer() { set_serving(true); }
  using httplib::Server::process_request;
  // httplib's streamed answers stop once its listening socket is gone (svr_sock_ invalid); it has none here (the
  // front listens), so serving is marked with a placeholder value and cleared at shutdown.
  void set_serving(bool on) { svr_sock_ = on ? 0 : INVALID_SOCKET; }
};

struct Server::Impl {
  Impl(ServerOptions o, ServedModel m)
      : options(std::move(o)),
        model(std::move(m)),
        template_format(chat::template_output_format(model.chat_format.source(), model.chat_format.bos_text(),
                                                     model.chat_format.eos_text())) {}

  // Declared in dependency order: members are destroyed bottom-up, so the HTTP side goes before the replicas
  // it submits to, and the replicas before the tokenizer (in model) they decode with.
  ServerOptions options;
  ServedModel model;
  chat::OutputFormat template_format;  // how the template writes tool calls, learned once (chat/derived.h)
  Router router;
  Metrics metrics;
  std::atomic<ServeState> state{ServeState::Loading};
  std::mutex failure_mutex;
  std::string failure;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_id{1};
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  RoutedServer http;
  std::unique_ptr<HttpFront> front;  // reads requests with bounds, then hands them to `http`

  void routes();
  void health(httplib::Response& res);
  std::string new_id(std::string_view prefix);
  std::string body_limit_message() const;
};

// Writes an OpenAI error body with its status (and Retry-After for 503).
void send_error(httplib::Response& res, const ApiError& e, int retry_after_seconds = 0);
void send_json(httplib::Response& res, int status, const nlohmann::json& body);

// POST /v1/chat/completions and /v1/completions.
void handle_generation(Server::Impl& s, const httplib::Request& req, const std::string& body, httplib::Response& res,
                       Endpoint endpoint);

}  // namespace tessera::server
