// The head's own profile from `tessera probe`: measured now, read from a short-lived cache so repeated plans do not
// re-measure, or loaded from a saved `tessera probe --json` output.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "hw/probe.h"
#include "plan/node_profile.h"

namespace tessera::plan {

NodeProfile node_from_probe(const ProbeResult& probe, std::string name = "local", std::string source = "probe");

// A `tessera probe --json` object (the measured fields; cpu/isa are optional). Throws Error naming `where` and the
// field for anything missing or out of range.
NodeProfile node_from_probe_json(std::string_view text, const std::string& where, std::string name = "local");

struct LocalProbeOptions {
  double seconds = 1.0;  // measuring time when the cache cannot answer
  int threads = 0;       // 0: all cores
  double max_age_s = 600;
  bool use_cache = true;
  std::optional<std::filesystem::path> cache_path;  // default: default_probe_cache_path()
};

// $XDG_CACHE_HOME/tessera/probe.json, else $HOME/.cache/tessera/probe.json; empty when neither is set.
std::filesystem::path default_probe_cache_path();

// Probes this machine, or reuses a cached probe of the same host and core count younger than max_age_s. Free
// memory is always read fresh (it changes by the second). A cache that cannot be written is not an error.
NodeProfile probe_local_node(const LocalProbeOptions& options);

}  // namespace tessera::plan
