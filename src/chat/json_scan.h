// A forgiving scanner for JSON text that may still be arriving: it finds where a value ends, or says that the
// text so far could still become one (Incomplete) or never can (Invalid). The tool-call parsers use it to cut
// arguments out of model output token by token; nlohmann::json validates the finished pieces.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tessera::chat {

enum class Scan { Complete, Incomplete, Invalid };

struct ScanResult {
  Scan status = Scan::Invalid;
  size_t end = 0;  // Complete: one past the value
};

// Skips JSON whitespace from `pos`.
size_t skip_ws(std::string_view text, size_t pos);

// A string starting at text[pos] == '"'. With `decoded`, its value when Complete.
ScanResult scan_json_string(std::string_view text, size_t pos, std::string* decoded = nullptr);

// Any value starting at `pos` (no leading whitespace). Objects and arrays are checked for balance and for bytes
// JSON cannot hold there; numbers and literals loosely (nlohmann::json checks the finished text).
ScanResult scan_json_value(std::string_view text, size_t pos);

// The length of the longest suffix of `text` that is a proper prefix of `marker` (text that may become it).
size_t partial_marker_suffix(std::string_view text, std::string_view marker);

}  // namespace tessera::chat
