// bench's output formats: llama-bench's markdown table (with the roofline and wire columns), CSV and JSON, one
// result at a time as each test completes.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/benchmark.h"

namespace tessera {

class BenchPrinter {
 public:
  virtual ~BenchPrinter() = default;
  virtual void header() {}
  virtual void row(const BenchResult& r) = 0;
  virtual void footer() {}
};

// One result under llama-bench's field names, then Tessera's extras (the CSV and JSON rows).
nlohmann::ordered_json bench_result_json(const BenchResult& r, const std::string& cpu);

// A result object as llama-bench's CSV: every value quoted, arrays left out; the names first when `header`.
void print_bench_csv(const nlohmann::ordered_json& row, bool header);

// "md", "csv" or "json"; the markdown table sizes its columns for the model's name and the longest test name.
std::unique_ptr<BenchPrinter> make_bench_printer(const std::string& format, const std::string& cpu,
                                                 const BenchModel& model, bool roofline, bool distributed,
                                                 const std::string& split, size_t test_width);

}  // namespace tessera
