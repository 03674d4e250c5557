// The allowed dependency matrix of src/ and the scan that checks every #include against it.
#include "layering/include_rules.h"

#include <algorithm>
#include <fstream>
#include <regex>

namespace tessera::test {

namespace fs = std::filesystem;

IncludeRules tessera_include_rules() {
  IncludeRules r;
  // Each layer lists everything below it that it may use: the matrix is the transitive closure of the diagram.
  r.may_include["util"] = {};
  r.may_include["tensor"] = {"util"};
  r.may_include["hw"] = {"tensor", "util"};
  r.may_include["gguf"] = {"tensor", "util"};
  r.may_include["jinja"] = {"util"};
  r.may_include["tokenizer"] = {"jinja", "gguf", "tensor", "util"};
  r.may_include["collective"] = {"util"};
  r.may_include["grammar"] = {"util"};
  r.may_include["chat"] = {"jinja", "util"};  // a template's own renders teach it unknown call syntaxes
  r.may_include["model"] = {"collective", "gguf", "tensor", "util"};
  r.may_include["engine"] = {"grammar", "hw", "model", "collective", "tokenizer", "jinja", "gguf", "tensor", "util"};
  r.may_include["net"] = {"tensor", "util"};
  r.may_include["cluster"] = {"grammar",   "net",   "engine", "hw",     "model", "collective",
                              "tokenizer", "jinja", "gguf",   "tensor", "util"};
  r.may_include["plan"] = {"grammar",    "cluster",   "net",   "engine", "hw",     "model",
                           "collective", "tokenizer", "jinja", "gguf",   "tensor", "util"};
  r.may_include["server"] = {"chat",      "grammar", "engine", "hw",     "model", "collective",
                             "tokenizer", "jinja",   "gguf",   "tensor", "util"};
  r.may_include["cli"] = {"chat",  "grammar",    "server",    "plan",  "cluster", "net",    "engine", "hw",
                          "model", "collective", "tokenizer", "jinja", "gguf",    "tensor", "util"};
  // The kernels are reached through tensor/kernels.h only.
  r.private_headers["tensor/kernels/"] = "tensor/";
  // ISA intrinsics and CPU identification stay in the x86 folders, so another architecture builds the rest.
  const std::vector<std::string> x86 = {"tensor/kernels/x86/"};
  r.isa_headers["immintrin.h"] = x86;
  r.isa_headers["x86intrin.h"] = x86;
  r.isa_headers["cpuid.h"] = x86;
  return r;
}

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

void check_file(const fs::path& path, const std::string& rel, const IncludeRules& rules,
                std::vector<IncludeViolation>& out) {
  const std::string layer = rel.substr(0, rel.find('/'));
  const auto allowed = rules.may_include.find(layer);
  std::ifstream in(path);
  static const std::regex kInclude(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    std::smatch m;
    if (!std::regex_search(text, m, kInclude)) continue;
    const std::string inc = m[2].str();
    auto report = [&](std::string why) { out.push_back({rel, line, inc, std::move(why)}); };
    if (m[1].str() == "<") {
      const auto isa = rules.isa_headers.find(inc);
      if (isa == rules.isa_headers.end()) continue;
      const bool ok = std::any_of(isa->second.begin(), isa->second.end(),
                                  [&](const std::string& prefix) { return starts_with(rel, prefix); });
      if (!ok) report("an ISA header outside the ISA folders");
      continue;
    }
    const auto slash = inc.find('/');
    if (slash == std::string::npos) {
      if (inc.ends_with(".inc")) continue;  // generated beside the including file (the web page's bytes)
      report("project headers are included by their path from src/ (\"layer/file.h\")");
      continue;
    }
    const std::string target = inc.substr(0, slash);
    if (allowed == rules.may_include.end()) {
      report("folder '" + layer + "' has no place in the layering rules");
    } else if (target != layer && !allowed->second.contains(target)) {
      report("layer '" + layer + "' may not depend on layer '" + target + "'");
    }
    for (const auto& [prefix, owner] : rules.private_headers) {
      if (starts_with(inc, prefix) && !starts_with(rel, owner)) report("a header private to " + owner);
    }
  }
}

}  // namespace

std::vector<IncludeViolation> check_includes(const fs::path& src_root, const IncludeRules& rules) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(src_root)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext == ".h" || ext == ".cpp" || ext == ".inl") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<IncludeViolation> out;
  for (const fs::path& f : files) check_file(f, fs::relative(f, src_root).generic_string(), rules, out);
  return out;
}

std::string describe(const IncludeViolation& v) {
  return "src/" + v.file + ":" + std::to_string(v.line) + ": #include " + v.include + ": " + v.why;
}

}  // namespace tessera::test
