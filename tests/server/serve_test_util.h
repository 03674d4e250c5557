// Shared by the end-to-end tests of `tessera serve`: an httplib client bound to the test server, SSE stream
// checks, and `tessera run` as the reference output.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/serve_process.h"
#include "server/sse.h"
#include "support/test_paths.h"

namespace tessera::test {

using nlohmann::json;

inline httplib::Client client(const ServeProcess& s) {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  c.set_connection_timeout(5, 0);
  return c;
}

inline json parse(const std::string& body) {
  auto j = json::parse(body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << body;
  return j;
}

// A well-formed OpenAI error object with these status-specific fields.
// GET `path`, its body parsed; an empty object with a failed test when the request failed.
inline json get_json(const ServeProcess& s, const std::string& path) {
  auto c = client(s);
  auto r = c.Get(path);
  EXPECT_TRUE(r);
  return r ? parse(r->body) : json{};
}

// GET /health, parsed.
inline json health(const ServeProcess& s) { return get_json(s, "/health"); }

inline void expect_error(const httplib::Result& r, int status, const std::string& type, const json& param,
                         const json& code) {
  ASSERT_TRUE(r) << "no response: " << httplib::to_string(r.error());
  EXPECT_EQ(r->status, status) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  const json j = parse(r->body);
  ASSERT_TRUE(j.contains("error")) << r->body;
  const json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r->body;
  EXPECT_EQ(e["type"], type) << r->body;
  EXPECT_EQ(e["param"], param) << r->body;
  EXPECT_EQ(e["code"], code) << r->body;
}

// A complete SSE body: every event `data: <json>` + blank line, closed by `data: [DONE]`. Returns the JSON
// events (without [DONE]).
inline std::vector<json> parse_stream(const std::string& body) {
  server::SseParser p;
  const auto events = p.push(body);
  EXPECT_EQ(p.bad_lines(), 0) << body;
  EXPECT_TRUE(p.pending().empty()) << "trailing bytes: " << p.pending();
  EXPECT_FALSE(events.empty());
  EXPECT_TRUE(body.size() >= 14 && body.compare(body.size() - 14, 14, "data: [DONE]\n\n") == 0) << body;
  std::vector<json> out;
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i] == "[DONE]") {
      EXPECT_EQ(i + 1, events.size()) << "[DONE] is not last";
      continue;
    }
    out.push_back(parse(events[i]));
  }
  return out;
}

// `tessera run` standard output for these arguments (its exit code checked).
inline std::string tessera_run(std::vector<std::string> args) {
  args.insert(args.begin(), {tessera_bin().string(), "run"});
  const auto r = run_command(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

inline json post(httplib::Client& c, const std::string& path, const json& body, int want_status = 200) {
  auto r = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(r) << httplib::to_string(r.error());
  if (!r) return {};
  EXPECT_EQ(r->status, want_status) << r->body;
  return parse(r->body);
}

// The same completion request sent n times at once, each from its own client; the texts in order.
inline std::vector<std::string> concurrent_completions(const ServeProcess& s, const json& ask, int n) {
  std::vector<std::future<std::string>> answers;
  for (int i = 0; i < n; ++i) {
    answers.push_back(std::async(std::launch::async, [&s, ask] {
      auto c = client(s);
      return post(c, "/v1/completions", ask)["choices"][0]["text"].get<std::string>();
    }));
  }
  std::vector<std::string> out;
  for (auto& a : answers) out.push_back(a.get());
  return out;
}

}  // namespace tessera::test
