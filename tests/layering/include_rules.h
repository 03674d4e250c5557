// The layering of src/ as data: which folders each folder may include from, which headers are private to a folder,
// and where ISA headers may appear; and a checker that reports every #include breaking them.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tessera::test {

struct IncludeRules {
  // Folder under src/ -> the folders its files may include from (its own is always allowed).
  std::map<std::string, std::set<std::string>> may_include;
  // Path prefix of private headers -> the path prefix of the files that may include them.
  std::map<std::string, std::string> private_headers;
  // System headers that tie a file to one ISA (<immintrin.h>) -> the path prefixes of the files that may use them.
  std::map<std::string, std::vector<std::string>> isa_headers;
};

struct IncludeViolation {
  std::string file;  // relative to the src/ folder checked
  int line = 0;
  std::string include;
  std::string why;
};

// Tessera's own rules (docs/architecture.md draws them).
IncludeRules tessera_include_rules();

// Every #include of every .h/.cpp/.inl file below src_root that breaks the rules, in path order.
std::vector<IncludeViolation> check_includes(const std::filesystem::path& src_root, const IncludeRules& rules);

std::string describe(const IncludeViolation& v);

}  // namespace tessera::test
