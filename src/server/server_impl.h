// The server's state shared by its source files (routes in http_server.cpp, generation in completions.cpp).
// Internal to src/server.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "server/http_server.h"
#include "server/metrics.h"

namespace tessera::server {

enum class ServeState { Loading, Ready, Failed };

struct Server::Impl {
  Impl(ServerOptions o, ServedModel m) : options(std::move(o)), model(std::move(m)) {}

  // Declared in dependency order: members are destroyed bottom-up, so the HTTP side goes before the replicas
  // it submits to, and the replicas before the tokenizer (in model) they decode with.
  ServerOptions options;
  ServedModel model;
  Router router;
  Metrics metrics;
  std::atomic<ServeState> state{ServeState::Loading};
  std::mutex failure_mutex;
  std::string failure;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_id{1};
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  httplib::Server http;
  std::thread listener;

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
