// Streams generated text while watching for stop strings: text that might begin a stop string is held back
// until it is certain, and a matched stop string (and everything after it) is never emitted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops);

  // Adds text; returns what may be shown now. After a match, stopped() is true and later input is ignored.
  std::string push(std::string_view text);
  // The held-back text, once generation ends without a match.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace tessera
