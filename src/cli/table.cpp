// TextTable rendering: widths from the widest cell, numbers right-aligned so digits line up.
#include "cli/table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace tessera {
namespace {

bool looks_numeric(const std::string& s) {
  if (s.empty()) return true;
  const char first = s.front();
  return std::isdigit(static_cast<unsigned char>(first)) || ((first == '-' || first == '.') && s.size() > 1);
}

}  // namespace

std::string TextTable::render(const std::string& indent) const {
  const size_t cols = header_.size();
  std::vector<size_t> width(cols, 0);
  std::vector<bool> numeric(cols, true);
  for (size_t c = 0; c < cols; ++c) width[c] = header_[c].size();
  for (const auto& row : rows_) {
    for (size_t c = 0; c < cols && c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
      if (!looks_numeric(row[c])) numeric[c] = false;
    }
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line = indent;
    for (size_t c = 0; c < cols; ++c) {
      const std::string& cell = c < row.size() ? row[c] : std::string();
      if (c > 0) line += "  ";
      line += numeric[c] ? fmt::format("{:>{}}", cell, width[c]) : fmt::format("{:<{}}", cell, width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
  return out;
}

std::string human_bytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, units[u]);
}

std::string human_count(uint64_t n) {
  if (n < 1000) return fmt::format("{}", n);
  const char* units[] = {"K", "M", "B", "T"};
  double v = static_cast<double>(n) / 1000.0;
  int u = 0;
  while (v >= 1000.0 && u < 3) {
    v /= 1000.0;
    ++u;
  }
  return fmt::format("{:.2f} {}", v, units[u]);
}

}  // namespace tessera
