// bench's output formats (bench_output.h): llama-bench's field names and table, then Tessera's extras.
#include "cli/bench_output.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "tensor/kernels.h"

namespace tessera {
namespace {

using Json = nlohmann::ordered_json;

Json optional_number(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

}  // namespace

void print_bench_csv(const Json& j, bool header) {
  std::string names, values;
  for (const auto& [key, value] : j.items()) {
    if (value.is_array()) continue;
    const std::string text = value.is_string() ? value.get<std::string>() : value.is_null() ? "" : value.dump();
    std::string quoted = "\"";
    for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    quoted += '"';
    names += (names.empty() ? "" : ",") + key;
    values += (values.empty() ? "" : ",") + quoted;
  }
  if (header) fmt::print("{}\n", names);
  fmt::print("{}\n", values);
  std::fflush(stdout);
}

// llama-bench's fields keep their meanings.
Json bench_result_json(const BenchResult& r, const std::string& cpu) {
  const BenchTiming& t = r.timing;
  return {{"cpu_info", cpu},
          {"backends", "CPU"},
          {"model_filename", r.model.filename},
          {"model_type", r.model.type},
          {"model_size", r.model.size},
          {"model_n_params", r.model.n_params},
          {"n_batch", r.n_batch},
          {"n_threads", r.n_threads},
          {"type_k", r.type_k},
          {"type_v", r.type_k},  // one cache type for keys and values
          {"n_prompt", t.test.n_prompt},
          {"n_gen", t.test.n_gen},
          {"n_depth", t.test.n_depth},
          {"test_time", r.test_time},
          {"avg_ns", t.avg_ns},
          {"stddev_ns", t.stddev_ns},
          {"avg_ts", t.avg_ts},
          {"stddev_ts", t.stddev_ts},
          {"samples_ns", t.samples_ns},
          {"samples_ts", t.samples_ts},
          {"roofline_ts", optional_number(r.roofline_ts)},
          {"roofline_fraction", optional_number(r.roofline_fraction)},
          {"roofline_fraction_best", optional_number(r.roofline_fraction_best)},
          {"mem_read_gbps", optional_number(r.mem_read_gbps)},
          {"mem_read_best_gbps", optional_number(r.mem_read_best_gbps)},
          {"mem_read_on", r.mem_read_on},
          {"samples_gbps", t.samples_gbps},
          {"samples_best_gbps", t.samples_best_gbps},
          {"isa", r.isa},
          {"n_workers", r.n_workers},
          {"split", r.split},
          {"concurrency", t.test.n_seq},
          {"wire_bytes_per_token", optional_number(t.wire_bytes_per_token)},
          {"collectives_per_token", t.collectives ? Json(t.collectives->calls) : Json(nullptr)},
          {"collective_bytes_per_token", t.collectives ? Json(t.collectives->bytes) : Json(nullptr)},
          {"collective_seconds_per_token", t.collectives ? Json(t.collectives->seconds) : Json(nullptr)},
          {"pipeline_wait_seconds_per_token", optional_number(t.pipeline_wait_s)},
          {"predicted_ts", optional_number(r.predicted_ts)}};
}

namespace {

// Every value quoted, as llama-bench writes it; the per-repeat samples stay in the JSON output.
class CsvPrinter : public BenchPrinter {
 public:
  explicit CsvPrinter(std::string cpu) : cpu_(std::move(cpu)) {}
  void row(const BenchResult& r) override {
    print_bench_csv(bench_result_json(r, cpu_), first_);
    first_ = false;
  }

 private:
  std::string cpu_;
  bool first_ = true;
};

// A JSON array, one object per test, printed as each test completes.
class JsonPrinter : public BenchPrinter {
 public:
  explicit JsonPrinter(std::string cpu) : cpu_(std::move(cpu)) {}
  void header() override { fmt::print("["); }
  void row(const BenchResult& r) override {
    std::string text = bench_result_json(r, cpu_).dump(2);
    std::string indented = "  ";
    for (char c : text) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
    fmt::print("{}\n{}", first_ ? "" : ",", indented);
    first_ = false;
    std::fflush(stdout);
  }
  void footer() override { fmt::print("\n]\n"); }

 private:
  std::string cpu_;
  bool first_ = true;
};

// llama-bench's markdown table with the roofline columns (when probed).
class MarkdownPrinter : public BenchPrinter {
 public:
  MarkdownPrinter(const BenchModel& model, bool roofline, bool distributed, const std::string& split, size_t test_width)
      : roofline_(roofline), distributed_(distributed) {
    cols_ = {{"model", -static_cast<int>(std::max<size_t>(30, model.type.size()))},
             {"size", 10},
             {"params", 10},
             {"threads", 7},
             {"test", static_cast<int>(std::max<size_t>(13, test_width))},
             {"t/s", 20}};
    if (distributed) {
      cols_.insert(cols_.begin() + 3, {"nodes", -std::max(16, static_cast<int>(split.size()))});
      cols_.push_back({"wire B/token", 12});
    }
    if (roofline) {
      cols_.push_back({"roofline t/s", 12});
      cols_.push_back({"% roofline", 10});
    }
  }
  void header() override {
    std::vector<std::string> names, rules;
    for (const auto& c : cols_) {
      names.push_back(c.name);
      rules.push_back(std::string(static_cast<size_t>(std::abs(c.width) - 1), '-') + (c.width > 0 ? ":" : "-"));
    }
    print_line(names);
    std::string line = "|";
    for (const auto& r : rules) line += " " + r + " |";
    fmt::print("{}\n", line);
  }
  void row(const BenchResult& r) override {
    const double size = static_cast<double>(r.model.size);
    const double params = static_cast<double>(r.model.n_params);
    std::vector<std::string> cells = {
        r.model.type,
        r.model.size < (uint64_t{1} << 30) ? fmt::format("{:.2f} MiB", size / (1 << 20))
                                           : fmt::format("{:.2f} GiB", size / (1 << 30)),
        r.model.n_params < 1000000000 ? fmt::format("{:.2f} M", params / 1e6) : fmt::format("{:.2f} B", params / 1e9),
        fmt::format("{}", r.n_threads),
        r.timing.test.name(),
        fmt::format("{:.2f} ± {:.2f}", r.timing.avg_ts, r.timing.stddev_ts)};
    if (distributed_) {
      cells.insert(cells.begin() + 3, r.n_workers > 0 ? r.split : "local");
      const auto& w = r.timing.wire_bytes_per_token;
      cells.push_back(w ? fmt::format("{:.0f}", *w) : "");
    }
    if (roofline_) {
      cells.push_back(r.roofline_ts ? fmt::format("{:.2f}", *r.roofline_ts) : "");
      cells.push_back(r.roofline_fraction ? fmt::format("{:.1f}%", 100 * *r.roofline_fraction) : "");
    }
    print_line(cells);
    std::fflush(stdout);
  }

 private:
  struct Column {
    std::string name;
    int width;  // negative: left-aligned
  };
  void print_line(const std::vector<std::string>& cells) const {
    std::string line = "|";
    for (size_t i = 0; i < cols_.size(); ++i) {
      const int w = std::abs(cols_[i].width);
      line += cols_[i].width < 0 ? fmt::format(" {:<{}} |", cells[i], w) : fmt::format(" {:>{}} |", cells[i], w);
    }
    fmt::print("{}\n", line);
  }
  bool roofline_;
  bool distributed_;
  std::vector<Column> cols_;
};

}  // namespace

std::unique_ptr<BenchPrinter> make_bench_printer(const std::string& format, const std::string& cpu,
                                                 const BenchModel& model, bool roofline, bool distributed,
                                                 const std::string& split, size_t test_width) {
  if (format == "csv") return std::make_unique<CsvPrinter>(cpu);
  if (format == "json") return std::make_unique<JsonPrinter>(cpu);
  return std::make_unique<MarkdownPrinter>(model, roofline, distributed, split, test_width);
}

}  // namespace tessera
