// Plain-text tables and human-readable sizes for terminal output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  size_t size() const { return rows_.size(); }
  // Columns whose cells all look numeric are right-aligned.
  std::string render(const std::string& indent = "") const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// 1536 -> "1.50 KiB"; below 1 KiB -> "512 B".
std::string human_bytes(uint64_t bytes);
// 1234567 -> "1.23 M"
std::string human_count(uint64_t n);

}  // namespace tessera
