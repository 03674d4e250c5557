// Routes, authentication, errors in OpenAI's format for every status (httplib's own 404 and 413 included),
// /health, /metrics, /v1/models and the embedded web page.
#include "server/http_server.h"

#include "server/request_origin.h"
#include "server/server_impl.h"
#include "server/web_assets.h"
#include "util/log.h"

namespace tessera::server {

using nlohmann::json;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e, int retry_after_seconds) {
  if (e.status() == 503 && retry_after_seconds > 0) res.set_header("Retry-After", std::to_string(retry_after_seconds));
  send_json(res, e.status(), error_json(e));
}

std::string Server::Impl::body_limit_message() const {
  return fmt::format("The request body is larger than the limit of {} bytes.", options.max_body_bytes);
}

std::string Server::Impl::new_id(std::string_view prefix) {
  return fmt::format("{}-{:x}{:06x}", prefix,
                     std::chrono::duration_cast<std::chrono::seconds>(started.time_since_epoch()).count(),
                     next_id.fetch_add(1));
}

namespace {

// Routes get their own metric label; anything else is "other", so random paths cannot grow the label set.
std::string_view route_label(const std::string& path) {
  static constexpr std::string_view known[] = {
      "/", "/health", "/metrics", "/v1/models", "/v1/chat/completions", "/v1/completions"};
  for (auto k : known) {
    if (path == k) return k;
  }
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/:id";
  if (find_web_asset(path)) return "/:asset";
  return "other";
}

// Constant-time comparison: how long a wrong key takes to refuse says nothing about the right one.
bool key_matches(std::string_view given, std::string_view expected) {
  if (given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return diff == 0;
}

json model_json(const ServedModel& m) {
  return {{"id", m.id}, {"object", "model"}, {"created", m.created}, {"owned_by", "tessera"}};
}

// Ready with some replicas unhealthy is "degraded"; with none healthy, "unavailable".
std::string_view state_name(ServeState s, size_t n_healthy, size_t n_replicas) {
  switch (s) {
    case ServeState::Loading:
      return "loading";
    case ServeState::Failed:
      return "failed";
    case ServeState::Ready:
      return n_healthy == n_replicas ? "ready" : n_healthy == 0 ? "unavailable" : "degraded";
  }
  return "";
}

}  // namespace

void Server::Impl::health(httplib::Response& res) {
  const auto replicas = router.replicas();
  const ServeState s = state.load();
  json reps = json::array();
  size_t n_healthy = 0;
  bool recovering = false;  // a replica replaces a failed worker: its requests wait, then go on
  for (const auto& r : replicas) {
    const auto st = r->scheduler().stats();
    const bool healthy = r->healthy();
    n_healthy += healthy;
    const RecoveryStats rec = r->recovery();
    recovering = recovering || rec.recovering;
    const auto live = r->live();
    json nodes = json::array();
    for (size_t i = 0; i < r->nodes().size(); ++i) {
      const NodeInfo& n = r->nodes()[i];
      json experts = nullptr;
      if (model.config.is_moe()) {
        experts = {{"count", model.config.n_expert}, {"used", model.config.n_expert_used}};
        experts["held"] = n.experts.empty() ? json("all") : json(n.experts);
      }
      nodes.push_back({{"name", n.name},
                       {"address", n.address},
                       {"status", live[i].up ? "up" : "down"},
                       {"running_on", live[i].on},
                       {"layers", {{"first", n.layers.begin}, {"last", n.layers.end - 1}}},
                       {"embedding", n.embedding},
                       {"head", n.head},
                       {"experts", experts},
                       {"memory",
                        {{"weights", n.weight_bytes},
                         {"kv_cache", n.kv_bytes},
                         {"used", n.weight_bytes + n.kv_bytes},
                         {"capacity", n.memory_capacity}}},
                       {"step_ms", st.mean_step_seconds * 1e3},
                       {"link_rtt_ms", live[i].link_rtt_seconds * 1e3},
                       {"bytes_sent", live[i].bytes_sent},
                       {"bytes_received", live[i].bytes_received}});
    }
    reps.push_back({{"id", r->id()},
                    {"status", rec.recovering ? "recovering"
                               : healthy      ? "ready"
                                              : "degraded"},
                    {"failovers", rec.failovers},
                    {"replayed_tokens", rec.replayed_tokens},
                    {"moved_out", st.moved_out},
                    {"moved_in", st.moved_in},
                    {"parallel", st.n_parallel},
                    {"active", st.active},
                    {"queued", st.queued},
                    {"max_queue", st.max_queue},
                    {"prompt_tokens_per_second", st.prompt_tokens_per_second},
                    {"decode_tokens_per_second", st.decode_tokens_per_second},
                    {"step_ms", st.mean_step_seconds * 1e3},
                    {"requests", st.accepted},
                    {"generated_tokens", st.generated_tokens},
                    {"last_error", st.last_error},
                    {"nodes", nodes}});
  }
  const std::string_view status =
      s == ServeState::Ready && recovering ? "recovering" : state_name(s, n_healthy, replicas.size());
  json body = {{"status", status},
               {"model", model.id},
               {"uptime_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()},
               {"model_info",
                {{"arch", model.config.arch_name},
                 {"n_layer", model.config.n_layer},
                 {"n_expert", model.config.n_expert},
                 {"n_expert_used", model.config.n_expert_used},
                 {"n_ctx", model.n_ctx},
                 {"chat_template", model.chat_format.description()}}},
               {"replicas", reps}};
  if (s == ServeState::Failed) {
    std::lock_guard lock(failure_mutex);
    body["error"] = failure;
  }
  // Degraded still serves (the router falls back to unhealthy replicas last): 200. Loading, failed and no healthy
  // replica at all are 503, so that a load balancer takes this server out until one recovers.
  const bool serving = s == ServeState::Ready && (n_healthy > 0 || recovering || replicas.empty());
  send_json(res, serving ? 200 : 503, body);
  if (!serving) res.set_header("Retry-After", std::to_string(options.retry_after_seconds));
}

void Server::Impl::routes() {
  http.set_payload_max_length(options.max_body_bytes);

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const OriginVerdict origin = check_origin(options.host, req.get_header_value("Host"),
                                              req.get_header_value("Origin"), options.allowed_origins);
    if (!origin.allowed) {
      send_error(res, ApiError(403, origin.reason, "invalid_request_error", {}, "origin_not_allowed"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (origin.cross_origin) {
      res.set_header("Access-Control-Allow-Origin", req.get_header_value("Origin"));
      res.set_header("Vary", "Origin");
    }
    // A preflight carries no key: it asks whether the real request may carry one.
    if (req.method == "OPTIONS") return httplib::Server::HandlerResponse::Unhandled;
    if (options.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    constexpr std::string_view bearer = "Bearer ";
    if (auth.empty()) {
      send_error(res, ApiError(401,
                               "You didn't provide an API key. You need to provide your API key in an Authorization "
                               "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                               "invalid_request_error", {}, "missing_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (auth.rfind(bearer, 0) != 0 || !key_matches(std::string_view(auth).substr(bearer.size()), options.api_key)) {
      send_error(res, ApiError(401, "Incorrect API key provided.", "invalid_request_error", {}, "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // httplib answers some requests itself (no route: 404, body too large: 413, unparsable: 400) with an empty
  // body; give those OpenAI's error object too.
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return;
    std::string message;
    std::string code;
    switch (res.status) {
      case 404:
        message = fmt::format("Unknown request URL: {} {}. Please check the URL for typos.", req.method, req.path);
        code = "unknown_url";
        break;
      case 413:
        message = body_limit_message();
        code = "request_too_large";
        break;
      default:
        message = fmt::format("The request could not be handled (HTTP {}).", res.status);
    }
    res.set_content(dump(error_json(message, res.status >= 500 ? "server_error" : "invalid_request_error", {}, code)),
                    "application/json");
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log_warn("serve: internal error: {}", what);
    send_json(res, 500, error_json(fmt::format("Internal server error: {}", what), "server_error"));
  });
  // Counted before the response goes out (the logger runs after it): a client that reads /metrics right after its
  // answer, on another connection, must already see that answer counted.
  http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    metrics.record_http(route_label(req.path), res.status);
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) { health(res); });
  // CORS preflight of an origin from --allowed-origin (the pre-routing handler refused every other one).
  http.Options(R"(/v1/.*)", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
    res.set_header("Access-Control-Max-Age", "600");
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(router.replicas(), state.load() == ServeState::Ready),
                    "text/plain; version=0.0.4; charset=utf-8");
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_json(model)})}});
  });
  http.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != model.id) {
      send_error(res, ApiError(404, fmt::format("The model '{}' does not exist or you do not have access to it.", id),
                               "invalid_request_error", "model", "model_not_found"));
      return;
    }
    send_json(res, 200, model_json(model));
  });
  // The body is read here rather than by httplib: httplib caps bodies sent as form data (curl -d's default content
  // type) at 8 KiB and parses them as query strings, neither of which fits a JSON API.
  auto generation = [this](Endpoint endpoint) {
    return [this, endpoint](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
      std::string body;
      bool overflow = false;
      const bool complete = read([&](const char* data, size_t n) {
        overflow = body.size() + n > options.max_body_bytes;
        if (overflow) return false;
        body.append(data, n);
        return true;
      });
      if (!complete) {
        // httplib refuses a declared Content-Length over the limit itself (status 413); a chunked body is cut here.
        const bool too_large = overflow || res.status == 413;
        send_error(res, too_large
                            ? ApiError(413, body_limit_message(), "invalid_request_error", {}, "request_too_large")
                            : ApiError(400, "The request body could not be read.", "invalid_request_error"));
        return;
      }
      handle_generation(*this, req, body, res, endpoint);
    };
  };
  http.Post("/v1/chat/completions", generation(Endpoint::Chat));
  http.Post("/v1/completions", generation(Endpoint::Completion));
  // The page and its scripts: compiled into the binary, nothing read from disk at run time.
  http.Get("/(|[A-Za-z0-9_.-]+)", [](const httplib::Request& req, httplib::Response& res) {
    const WebAsset* asset = find_web_asset(req.path);
    if (!asset) {
      res.status = 404;
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_content(asset->body.data(), asset->body.size(), std::string(asset->content_type));
  });
}

Server::Server(ServerOptions options, ServedModel model)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(model))) {
  if (!impl_->model.tokenizer) fail("the server needs the model's tokenizer");
  if (const auto& f = impl_->template_format; f.derived && f.tools == chat::ToolFamily::Derived)
    log_info("tool calls: the syntax the chat template writes them in, learned from it (blocks open with {})",
             f.derived->marker);
  if (const auto& f = impl_->template_format; f.reasoning == chat::ReasoningFormat::Derived)
    log_info("reasoning: the markers the chat template writes, learned from it ({} .. {})", f.markup.open,
             f.markup.close);
  impl_->routes();
}

Server::~Server() { stop(); }

int Server::start() {
  Impl& s = *impl_;
  HttpFront::Options front;
  front.limits = s.options.http_limits;
  front.limits.body_bytes = s.options.max_body_bytes;
  front.threads = std::max(s.options.http_threads, 4);
  front.retry_after_seconds = s.options.retry_after_seconds;
  s.front = std::make_unique<HttpFront>(
      front,
      [&s](httplib::Stream& stream, bool close_connection, bool& connection_closed) {
        s.http.process_request(stream, close_connection, connection_closed, [](httplib::Request&) {});
      },
      [](int status, std::string_view message) {
        return dump(error_json(std::string(message), status >= 500 ? "server_error" : "invalid_request_error"));
      });
  const int port = s.front->bind(s.options.host, s.options.port);
  s.front->start();
  return port;
}

void Server::add_replica(ReplicaSpec spec, const SchedulerOptions& options) {
  const int id = static_cast<int>(impl_->router.size());
  impl_->router.add(std::make_shared<Replica>(id, std::move(spec), *impl_->model.tokenizer, options));
}

void Server::set_ready() { impl_->state = ServeState::Ready; }

void Server::set_failed(const std::string& why) {
  {
    std::lock_guard lock(impl_->failure_mutex);
    impl_->failure = why;
  }
  impl_->state = ServeState::Failed;
}

void Server::stop() {
  Impl& s = *impl_;
  s.stopping = true;  // waiting handlers cancel their requests and return
  s.http.set_serving(false);
  if (s.front) s.front->stop();
}

const ServerOptions& Server::options() const { return impl_->options; }
const ServedModel& Server::model() const { return impl_->model; }
Router& Server::router() { return impl_->router; }

}  // namespace tessera::server
