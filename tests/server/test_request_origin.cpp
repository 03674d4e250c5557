// Host and Origin checks: a cross-site page and a DNS name rebound to loopback are refused with a 403 naming the
// header, the server's own page and non-browser clients pass, and --allowed-origin lets a listed site in (CORS).
#include <gtest/gtest.h>
#include <httplib.h>

#include "server/http_server.h"
#include "server/request_origin.h"
#include "support/test_paths.h"

namespace tessera::server {
namespace {

using nlohmann::json;

TEST(RequestOrigin, LoopbackNamesAndHostOf) {
  for (const char* h : {"localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "app.localhost"})
    EXPECT_TRUE(is_loopback_host(h)) << h;
  for (const char* h : {"evil.example", "10.0.0.1", "localhost.evil.example", "128.0.0.1", ""})
    EXPECT_FALSE(is_loopback_host(h)) << h;
  EXPECT_EQ(host_of("Example.COM:8080"), "example.com");
  EXPECT_EQ(host_of("[::1]:8080"), "[::1]");
  EXPECT_EQ(host_of("127.0.0.1"), "127.0.0.1");
}

TEST(RequestOrigin, Verdicts) {
  const std::vector<std::string> none;
  // No browser headers: a command-line client.
  EXPECT_TRUE(check_origin("127.0.0.1", "", "", none).allowed);
  EXPECT_TRUE(check_origin("127.0.0.1", "127.0.0.1:8080", "", none).allowed);
  EXPECT_TRUE(check_origin("127.0.0.1", "localhost:8080", "http://localhost:8080", none).allowed);  // own page
  // A name rebound to 127.0.0.1: refused on a loopback server, whatever the origin.
  auto v = check_origin("127.0.0.1", "evil.example:8080", "http://evil.example:8080", none);
  EXPECT_FALSE(v.allowed);
  EXPECT_NE(v.reason.find("Host 'evil.example:8080'"), std::string::npos) << v.reason;
  // Listening on every address, any Host is the machine's own name or address.
  EXPECT_TRUE(check_origin("0.0.0.0", "gpu-box:8080", "", none).allowed);
  EXPECT_TRUE(check_origin("0.0.0.0", "gpu-box:8080", "http://gpu-box:8080", none).allowed);
  // A page on another site.
  v = check_origin("127.0.0.1", "127.0.0.1:8080", "https://evil.example", none);
  EXPECT_FALSE(v.allowed);
  EXPECT_NE(v.reason.find("Origin 'https://evil.example'"), std::string::npos) << v.reason;
  EXPECT_NE(v.reason.find("--allowed-origin"), std::string::npos) << v.reason;
  EXPECT_FALSE(check_origin("127.0.0.1", "127.0.0.1:8080", "null", none).allowed);
  EXPECT_FALSE(check_origin("127.0.0.1", "127.0.0.1:8080", "http://127.0.0.1:9999", none).allowed);
  // Listed, or every origin.
  v = check_origin("127.0.0.1", "127.0.0.1:8080", "https://app.example", {"https://app.example"});
  EXPECT_TRUE(v.allowed);
  EXPECT_TRUE(v.cross_origin);
  EXPECT_TRUE(check_origin("127.0.0.1", "127.0.0.1:8080", "https://other.example", {"*"}).allowed);
  EXPECT_FALSE(check_origin("127.0.0.1", "127.0.0.1:8080", "https://other.example", {"https://app.example"}).allowed);
}

// Over HTTP, on a real server (no replica needed: the checks come before any route).
TEST(RequestOrigin, ServerRefusesCrossSiteAndRebindingAndAnswersPreflights) {
  ServerOptions o;
  o.port = 0;
  o.allowed_origins = {"https://app.example"};
  const auto weights = ModelWeights::load(test::source_dir() / "models/stories260K.gguf");
  ServedModel m;
  m.id = "stories";
  m.tokenizer = Tokenizer::from_metadata(weights->file().metadata());
  m.config = weights->config();
  m.n_ctx = 64;
  Server server(o, m);
  const int port = server.start();
  httplib::Client c("127.0.0.1", port);
  const std::string body = R"({"prompt":"x","max_tokens":1})";

  auto r = c.Post("/v1/completions", {{"Origin", "https://evil.example"}}, body, "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "origin_not_allowed") << r->body;

  r = c.Get("/health", {{"Host", "rebound.example:" + std::to_string(port)}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("rebound.example"), std::string::npos) << r->body;

  // The server's own page, and a client without an Origin: through the checks (503: still loading).
  r = c.Get("/health", {{"Origin", "http://127.0.0.1:" + std::to_string(port)}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  r = c.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);

  // A listed origin: its preflight and its request carry Access-Control-Allow-Origin.
  r = c.Options("/v1/completions", {{"Origin", "https://app.example"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_NE(r->get_header_value("Access-Control-Allow-Headers").find("Authorization"), std::string::npos);
  r = c.Post("/v1/completions", {{"Origin", "https://app.example"}}, body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  server.stop();
}

}  // namespace
}  // namespace tessera::server
