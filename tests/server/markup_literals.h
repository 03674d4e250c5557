// The literal texts of a tool-call markup, for random walks through forced-call grammars (grammar/random_walk.h
// takes them whole now and then: free text ends only at a closing tag, which byte by byte a walk hardly completes).
#pragma once

#include <string>
#include <vector>

#include "chat/derived.h"
#include "chat/output.h"

namespace tessera::test {

inline std::vector<std::string> markup_literals(const chat::OutputFormat& f) {
  if (!f.derived) return {"<|\"|>", "}<tool_call|>", "<tool_call|>"};
  std::vector<std::string> out = {f.derived->close, f.derived->sep, f.derived->pair_sep};
  for (const std::string* p : {&f.derived->call, &f.derived->pair, &f.derived->pair_json}) {
    std::string lit;
    for (char ch : *p + '\x01') {
      if (ch >= chat::kName && ch <= chat::kValue) {
        if (!lit.empty()) out.push_back(lit);
        lit.clear();
      } else {
        lit += ch;
      }
    }
  }
  return out;
}

}  // namespace tessera::test
