// Real `tessera worker` processes on loopback for the group tests (--tp/--ep over --workers, --place): one cluster
// key, the workers, their --workers list, and the helpers those tests share (run the binary, count a log line,
// compare logits).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/scalar_isa.h"  // every process of a group test: logits compare across processes
#include "support/test_paths.h"
#include "support/worker_process.h"

namespace tessera::test {

inline std::filesystem::path stories() { return source_dir() / "models/stories260K.gguf"; }

// How often `what` occurs in `text`.
inline size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The largest difference between two --logits-out files' floats (which must be as many, and some).
inline float max_logit_diff(const std::filesystem::path& a_path, const std::filesystem::path& b_path) {
  const auto a = read_floats(a_path);
  const auto b = read_floats(b_path);
  EXPECT_EQ(a.size(), b.size());
  EXPECT_GT(a.size(), 0u);
  float max_diff = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
  return a.size() == b.size() ? max_diff : INFINITY;
}

// A key file in `dir` and workers named a, b, c, ... in the order added, each holding the key.
struct WorkerGroup {
  // n workers that map models from `models`.
  WorkerGroup(const TempDir& dir, int n, const std::filesystem::path& models, const std::string& name = "k") {
    key = (dir / (name + ".key")).string();
    EXPECT_EQ(tessera({"keygen", "-o", key}).exit_code, 0);
    for (int i = 0; i < n; ++i) add(models);
  }
  // One more worker mapping models from `models`, with `extra` arguments.
  void add(const std::filesystem::path& models, std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--models", models.string()});
    add_with(std::move(extra));
  }
  // One more worker with only the key and `args` (no --models: say --cache DIR for one that receives its share).
  void add_with(std::vector<std::string> args, const std::filesystem::path& log = {}) {
    args.insert(args.begin(), {"--key-file", key});
    workers.push_back(std::make_unique<WorkerProcess>(args, "127.0.0.1:0", log));
  }
  // "a=HOST:PORT,b=..." for the workers given by index (all by default).
  std::string list(std::vector<size_t> which = {}) const {
    if (which.empty()) {
      for (size_t i = 0; i < workers.size(); ++i) which.push_back(i);
    }
    std::string s;
    for (size_t i : which) {
      if (!s.empty()) s += ',';
      s += static_cast<char>('a' + i);
      s += '=';
      s += workers[i]->address();
    }
    return s;
  }
  std::string key;
  std::vector<std::unique_ptr<WorkerProcess>> workers;
};

}  // namespace tessera::test
