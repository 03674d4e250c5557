// `tessera inspect FILE [--json] [--tensors REGEX]`: a GGUF file's (or split set's) metadata, hyperparameters,
// tokenizer, tensors and memory needs.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/inspect_report.h"
#include "cli/table.h"
#include "util/error.h"

namespace tessera {
namespace {

using nlohmann::json;

// "0-1, 3, 5-7": layer indices, consecutive runs joined.
std::string layer_ranges(const std::vector<int64_t>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(layers[i]);
    if (j > i) out += "-" + std::to_string(layers[j]);
    i = j + 1;
  }
  return out;
}

std::string attention_name(const json& l) {
  return l["type"].get<std::string>() == "sliding" ? fmt::format("sliding (window {})", l["window"].get<int64_t>())
                                                   : std::string("global");
}

// Gemma's per-layer shapes, one line per kind of layer, then the K/V reuse and the MoE layers.
std::string layer_types_text(const json& layers) {
  std::vector<std::string> kinds;
  std::vector<std::vector<int64_t>> members;
  std::vector<int64_t> moe;
  std::string reuse;
  for (const auto& l : layers) {
    const int64_t il = l["layer"].get<int64_t>();
    const std::string kind =
        fmt::format("{}: head_dim {}, kv heads {}{}", attention_name(l), l["head_dim"].get<int64_t>(),
                    l["n_head_kv"].get<int64_t>(), l["has_v"].get<bool>() ? "" : ", V = K");
    const auto it = std::find(kinds.begin(), kinds.end(), kind);
    if (it == kinds.end()) {
      kinds.push_back(kind);
      members.push_back({il});
    } else {
      members[static_cast<size_t>(it - kinds.begin())].push_back(il);
    }
    if (l["kv_source"].get<int64_t>() != il) {
      reuse += fmt::format("{}{} -> {}", reuse.empty() ? "" : ", ", il, l["kv_source"].get<int64_t>());
    }
    if (l["moe"].get<bool>()) moe.push_back(il);
  }
  std::string out = "  layer types:\n";
  for (size_t k = 0; k < kinds.size(); ++k) {
    out += fmt::format("    {} (layers {})\n", kinds[k], layer_ranges(members[k]));
  }
  if (!reuse.empty())
    out += "  K/V reused (layer -> the layer whose K/V it reads, no cache of its own): " + reuse + "\n";
  if (!moe.empty()) out += "  MoE layers (experts beside the dense MLP): " + layer_ranges(moe) + "\n";
  return out;
}

// The KV cache per kind of layer: a sliding layer's ring, a global layer's whole context, the reusing layers' none.
std::string kv_types_text(const json& mem) {
  std::string out = fmt::format("  KV cache per layer type at -c {}:\n", mem["n_ctx"].get<int64_t>());
  for (const auto& t : mem["kv_layer_types"]) {
    const std::string name = t["type"].get<std::string>() == "sliding"
                                 ? fmt::format("sliding (window {})", t["window"].get<int64_t>())
                                 : std::string("global");
    out += fmt::format("    {}, kv heads {} x {}: {} layer{} x {} positions = {}", name, t["n_head_kv"].get<int64_t>(),
                       t["head_dim_k"].get<int64_t>(), t["n_layers"].get<int64_t>(),
                       t["n_layers"].get<int64_t>() == 1 ? "" : "s", t["n_cells"].get<int64_t>(),
                       human_bytes(t["bytes"].get<uint64_t>()));
    if (const int64_t n = t["n_reusing"].get<int64_t>(); n > 0) {
      out += fmt::format(" (+ {} layer{} reusing K/V, no cache)", n, n == 1 ? "" : "s");
    }
    out += "\n";
  }
  return out;
}

struct InspectArgs {
  std::string path;
  bool json = false;
  bool all_metadata = false;
  std::optional<std::string> tensors;
  int64_t n_ctx = 0;
  std::string kv_type = "f16";
};

std::string shape_text(const json& shape) {
  std::string s;
  for (const auto& d : shape) s += (s.empty() ? "" : " x ") + std::to_string(d.get<int64_t>());
  return s;
}

std::string metadata_text(const json& v) {
  if (v.is_object()) {
    std::string first;
    for (const auto& item : v["first"])
      first += (first.empty() ? "" : ", ") + item.dump(-1, ' ', false, json::error_handler_t::replace);
    const size_t length = v["length"].get<size_t>();
    return fmt::format("[{} x {}] [{}{}]", v["element_type"].get<std::string>(), length, first,
                       length > v["first"].size() ? ", ..." : "");
  }
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 100 ? s.substr(0, 97) + "..." : s;
}

std::string split_text(const json& r) {
  if (!r.contains("split")) return {};
  std::string names;
  for (const auto& f : r["split"]["files"]) {
    names += fmt::format("\n  {} ({})", f["file"].get<std::string>(), human_bytes(f["file_size"]));
  }
  return fmt::format("split:      {} files{}\n", r["split"]["n_files"].get<size_t>(), names);
}

TextTable tensor_table(const json& list, bool with_file) {
  std::vector<std::string> head = {"name", "type", "shape", "bytes"};
  if (with_file) head.emplace_back("file");
  TextTable tensors(head);
  for (const auto& t : list) {
    std::vector<std::string> row = {t["name"].get<std::string>(), t["type"].get<std::string>(), shape_text(t["shape"]),
                                    std::to_string(t["bytes"].get<uint64_t>())};
    if (with_file) row.push_back(std::to_string(t["split_file"].get<size_t>() + 1));
    tensors.add_row(row);
  }
  return tensors;
}

void print_tensors(const json& r) {
  std::string out = fmt::format("file:       {} ({})\n", r["file"].get<std::string>(), human_bytes(r["file_size"]));
  out += split_text(r);
  out += fmt::format("tensors:    {} of {} match '{}', {} ({} bytes)\n", r["n_matched"].get<size_t>(),
                     r["n_tensors"].get<size_t>(), r["pattern"].get<std::string>(), human_bytes(r["matched_bytes"]),
                     r["matched_bytes"].get<uint64_t>());
  if (!r["tensors"].empty()) out += "\n" + tensor_table(r["tensors"], r.contains("split")).render("  ");
  std::cout << out;
}

void print_text(const json& r, bool all_metadata) {
  std::string out;
  out += fmt::format("file:       {} ({}, GGUF v{}, alignment {}, data at byte {})\n", r["file"].get<std::string>(),
                     human_bytes(r["file_size"]), r["gguf_version"].get<int>(), r["alignment"].get<uint64_t>(),
                     r["data_offset"].get<uint64_t>());
  out += split_text(r);
  out += fmt::format("metadata:   {} keys; tensors: {}\n", r["n_metadata"].get<size_t>(), r["n_tensors"].get<size_t>());
  if (all_metadata) {
    TextTable t({"key", "value"});
    for (const auto& [key, value] : r["metadata"].items()) t.add_row({key, metadata_text(value)});
    out += "\n" + t.render("  ");
  }
  if (const auto& m = r["model"]; !m.is_null()) {
    out += fmt::format("\nmodel:      {} \"{}\"\n", m["architecture"].get<std::string>(), m["name"].get<std::string>());
    out += fmt::format("  layers {}, n_embd {}, n_ff {}, vocab {}, context {}\n", m["n_layer"].get<int64_t>(),
                       m["n_embd"].get<int64_t>(), m["n_ff"].get<int64_t>(), m["n_vocab"].get<int64_t>(),
                       m["n_ctx_train"].get<int64_t>());
    out += fmt::format("  heads {} (kv {}, head_dim {}), rope {} n_rot {} base {} scaling {}, rms_eps {}\n",
                       m["n_head"].get<int64_t>(), m["n_head_kv"].get<int64_t>(), m["head_dim"].get<int64_t>(),
                       m["rope_style"].get<std::string>(), m["n_rot"].get<int64_t>(), m["rope_freq_base"].get<float>(),
                       m["rope_scaling"].get<std::string>(), m["rms_eps"].get<float>());
    if (m["n_expert"].get<int64_t>() > 0) {
      out += fmt::format("  experts {} ({} used per token), expert n_ff {}\n", m["n_expert"].get<int64_t>(),
                         m["n_expert_used"].get<int64_t>(), m["n_ff_exp"].get<int64_t>());
    }
    out += fmt::format("  output head {}\n", m["tied_output"].get<bool>() ? "tied to token_embd" : "separate");
    if (r.contains("layers")) out += layer_types_text(r["layers"]);
  } else {
    out += fmt::format("\nmodel:      {} ({})\n",
                       r["architecture"].get<std::string>().empty() ? "none" : r["architecture"].get<std::string>(),
                       r["model_note"].get<std::string>());
  }
  if (const auto& t = r["tokenizer"]; !t.is_null()) {
    std::string line = fmt::format("\ntokenizer:  {} (pre {}), {} tokens", t["model"].get<std::string>(),
                                   t["pre"].get<std::string>(), t["n_tokens"].get<size_t>());
    if (t.contains("n_merges")) line += fmt::format(", {} merges", t["n_merges"].get<size_t>());
    for (const char* name : {"bos", "eos", "eot", "unknown"}) {
      if (!t.contains(name)) continue;
      const auto& e = t[name];
      line += fmt::format(", {} {}", name, e["id"].get<uint64_t>());
      if (e.contains("text")) line += " " + e["text"].dump(-1, ' ', false, json::error_handler_t::replace);
    }
    if (t.contains("add_bos")) line += fmt::format(", add_bos {}", t["add_bos"].get<bool>());
    out += line + "\n";
  }

  if (!r["tensors"].empty()) {
    out += "\ntensors:\n" + tensor_table(r["tensors"], r.contains("split")).render("  ");
    TextTable types({"type", "tensors", "bytes", "size"});
    for (const auto& [type, e] : r["tensor_types"].items()) {
      types.add_row({type, std::to_string(e["count"].get<int64_t>()), std::to_string(e["bytes"].get<uint64_t>()),
                     human_bytes(e["bytes"].get<uint64_t>())});
    }
    out += "\ntensor types:\n" + types.render("  ");
  }
  if (r.contains("bytes_per_layer")) {
    TextTable layers({"layer", "bytes", "size"});
    int layer = 0;
    for (const auto& b : r["bytes_per_layer"]) {
      layers.add_row({std::to_string(layer++), std::to_string(b.get<uint64_t>()), human_bytes(b.get<uint64_t>())});
    }
    const auto& tot = r["totals"];
    out += "\nbytes per layer:\n" + layers.render("  ");
    out += fmt::format("\ntotals:     {} parameters, weights {} (embedding {}, output {}), read per decoded token {}\n",
                       human_count(tot["n_params"]), human_bytes(tot["weight_bytes"]), human_bytes(tot["embd_bytes"]),
                       human_bytes(tot["output_bytes"]), human_bytes(tot["decode_bytes_per_token"]));
    const auto& mem = r["memory"];
    out += fmt::format("memory:     at -c {} with a {} KV cache: weights {} + KV cache {} + compute {} = {}\n",
                       mem["n_ctx"].get<int64_t>(), mem["kv_type"].get<std::string>(), human_bytes(mem["weights"]),
                       human_bytes(mem["kv_cache"]), human_bytes(mem["compute"]), human_bytes(mem["total"]));
    if (r.contains("layers")) out += kv_types_text(mem);
  }
  std::cout << out;
}

}  // namespace

Command add_inspect_command(CLI::App& root) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* app = root.add_subcommand("inspect", "Show a GGUF file's metadata, hyperparameters, tensors and memory");
  app->add_option("file", args->path, "GGUF file (the first file of a split set opens the set)")->required();
  app->add_option("--tensors", args->tensors,
                  "List only the tensors whose names match this regular expression (ECMAScript, found anywhere "
                  "in the name)");
  app->add_flag("--json", args->json, "Print the report as JSON");
  app->add_flag("--metadata", args->all_metadata, "List every metadata key");
  app->add_option("-c,--ctx-size", args->n_ctx,
                  "Context length for the memory estimate (default: the model's, <= 4096)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app->add_option("--kv-type", args->kv_type, "KV cache type for the memory estimate")
      ->check(CLI::IsMember({"f16", "f32"}));
  return {app, [args] {
            const auto file = gguf::GgufFile::open(args->path);
            if (args->tensors) {
              const json report = inspect_tensors_report(file, *args->tensors);
              if (args->json) {
                std::cout << report.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
              } else {
                print_tensors(report);
              }
              return 0;
            }
            InspectOptions options;
            options.n_ctx = args->n_ctx;
            options.kv_type = args->kv_type == "f32" ? GgmlType::F32 : GgmlType::F16;
            const json report = inspect_report(file, options);
            if (args->json) {
              std::cout << report.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
            } else {
              print_text(report, args->all_metadata);
            }
            return 0;
          }};
}

}  // namespace tessera
