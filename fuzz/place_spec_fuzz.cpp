// libFuzzer target for --place text (a user's command line): any text parses into stages that hold each node once,
// groups of two or more led by their first member, shares positive and one per member, or is refused with an Error.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cli/place_spec.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> workers = {"a", "b", "c", "vm1"};
  try {
    const auto stages = tessera::parse_place(text, workers);
    if (stages.empty()) __builtin_trap();
    std::set<std::string> seen;
    for (const auto& s : stages) {
      if (s.members.empty() || s.group() != (s.tp || s.ep)) __builtin_trap();
      if (!s.shares.empty() && s.shares.size() != s.members.size()) __builtin_trap();
      for (double share : s.shares) {
        if (!(share > 0) || !std::isfinite(share)) __builtin_trap();
      }
      for (size_t i = 0; i < s.members.size(); ++i) {
        if (!seen.insert(s.members[i]).second) __builtin_trap();  // a node holds one stage, once
        if (s.members[i] == "local" && i != 0) __builtin_trap();  // the head can only lead
      }
      (void)s.text();
      (void)s.shares_text();
    }
  } catch (const tessera::Error&) {
  }
  return 0;
}
