// libFuzzer target for the planner's user inputs: any cluster.json text and any --split text must parse or be
// refused with an Error, and a parsed split must resolve or be refused, never crash or hang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/cluster_file.h"
#include "plan/split_spec.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> names = {"local", "a", "b", "vm1"};
  try {
    const tessera::plan::Cluster cluster = tessera::plan::parse_cluster_json(text, "fuzz.json");
    names = cluster.node_name_list();
    (void)cluster.link(names.front(), names.back());
  } catch (const tessera::Error&) {
  }
  // Layer sizes from the input itself, so proportions meet uneven layers.
  const size_t n_layer = size % 97 + 1;
  std::vector<uint64_t> layer_bytes(n_layer);
  for (size_t i = 0; i < n_layer; ++i) layer_bytes[i] = 1 + (size > 0 ? data[i % size] : 0);
  try {
    const auto spec = tessera::plan::parse_split(text);
    const auto ranges = tessera::plan::resolve_split(spec, names, layer_bytes);
    // A resolved split covers every layer exactly once.
    size_t next = 0;
    for (const auto& r : ranges) {
      if (r.first != static_cast<int64_t>(next) || r.last < r.first) __builtin_trap();
      next = static_cast<size_t>(r.last) + 1;
    }
    if (next != n_layer) __builtin_trap();
    (void)tessera::plan::format_ranges(ranges);
  } catch (const tessera::Error&) {
  }
  return 0;
}
