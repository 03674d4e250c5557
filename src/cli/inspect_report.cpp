// Builds the inspect report: file facts, metadata, hyperparameters, tokenizer summary, tensors, sizes, memory.
#include "cli/inspect_report.h"

#include <algorithm>
#include <map>
#include <regex>

#include "model/model_config.h"
#include "model/model_profile.h"
#include "util/error.h"

namespace tessera {
namespace {

using nlohmann::json;

json scalar_json(const gguf::Value& v) {
  return std::visit(
      [](const auto& x) -> json {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::vector<gguf::Value>>) {
          return nullptr;
        } else {
          return x;
        }
      },
      v.storage());
}

json value_json(const gguf::Value& v) {
  if (v.type() != gguf::ValueType::ARRAY) return scalar_json(v);
  const auto& items = v.to_array("value");
  json first = json::array();
  for (size_t i = 0; i < items.size() && i < 8; ++i) first.push_back(value_json(items[i]));
  return json{
      {"element_type", std::string(gguf::value_type_name(v.array_type()))}, {"length", items.size()}, {"first", first}};
}

json tokenizer_json(const gguf::Metadata& md) {
  if (!md.contains("tokenizer.ggml.model")) return nullptr;
  json t;
  t["model"] = md.get_string("tokenizer.ggml.model");
  t["pre"] = md.opt_string("tokenizer.ggml.pre").value_or("default");
  const auto* tokens = md.find("tokenizer.ggml.tokens");
  const std::vector<gguf::Value>* list = tokens ? &tokens->to_array("tokenizer.ggml.tokens") : nullptr;
  t["n_tokens"] = list ? list->size() : 0;
  if (const auto* merges = md.find("tokenizer.ggml.merges")) {
    t["n_merges"] = merges->to_array("tokenizer.ggml.merges").size();
  }
  for (const char* name : {"bos", "eos", "eot", "unknown", "padding", "seperator"}) {
    const std::string key = fmt::format("tokenizer.ggml.{}_token_id", name);
    auto id = md.opt_u64(key);
    if (!id || *id == 0xFFFFFFFFull) continue;
    json entry{{"id", *id}};
    if (list && *id < list->size() && (*list)[*id].type() == gguf::ValueType::STRING) {
      entry["text"] = (*list)[*id].to_string(key);
    }
    t[name == std::string("seperator") ? "separator" : name] = entry;
  }
  if (auto add_bos = md.opt_bool("tokenizer.ggml.add_bos_token")) t["add_bos"] = *add_bos;
  if (auto add_eos = md.opt_bool("tokenizer.ggml.add_eos_token")) t["add_eos"] = *add_eos;
  t["has_chat_template"] = md.contains("tokenizer.chat_template");
  return t;
}

json config_json(const ModelConfig& c) {
  return json{{"architecture", c.arch_name},
              {"name", c.name},
              {"n_vocab", c.n_vocab},
              {"n_ctx_train", c.n_ctx_train},
              {"n_embd", c.n_embd},
              {"n_layer", c.n_layer},
              {"n_head", c.n_head},
              {"n_head_kv", c.n_head_kv},
              {"head_dim", c.head_dim},
              {"head_dim_v", c.head_dim_v},
              {"n_ff", c.n_ff},
              {"n_expert", c.n_expert},
              {"n_expert_used", c.n_expert_used},
              {"n_ff_exp", c.n_ff_exp},
              {"n_rot", c.n_rot},
              {"rope_style", c.rope_style() == RopeStyle::Norm ? "norm" : "neox"},
              {"rope_freq_base", c.rope_freq_base},
              {"rope_freq_scale", c.rope_freq_scale},
              {"rope_scaling", std::string(rope_scaling_name(c.rope_scaling))},
              {"rms_eps", c.rms_eps},
              {"tied_output", c.tied_output}};
}

// Gemma's layers differ: each one's attention type, head sizes, KV heads, the layer whose K/V it reads, FFN and MoE.
json layers_json(const ModelConfig& c) {
  json out = json::array();
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const LayerShape s = c.layer(il);
    out.push_back({{"layer", il},
                   {"type", s.is_swa() ? "sliding" : "global"},
                   {"window", s.window},
                   {"n_head", s.n_head},
                   {"n_head_kv", s.n_head_kv},
                   {"head_dim", s.head_dim},
                   {"head_dim_v", s.head_dim_v},
                   {"has_v", s.has_v},
                   {"kv_source", s.kv_source},
                   {"n_ff", s.n_ff},
                   {"moe", s.moe}});
  }
  return out;
}

json kv_types_json(const ModelConfig& c, int64_t n_ctx, GgmlType kv_type) {
  json out = json::array();
  for (const KvLayerType& t : kv_layer_types(c, n_ctx, kv_type)) {
    out.push_back({{"type", t.window > 0 ? "sliding" : "global"},
                   {"window", t.window},
                   {"n_head_kv", t.n_head_kv},
                   {"head_dim_k", t.head_dim_k},
                   {"head_dim_v", t.head_dim_v},
                   {"n_layers", t.n_layers},
                   {"n_reusing", t.n_reusing},
                   {"n_cells", t.n_cells},
                   {"bytes", t.bytes}});
  }
  return out;
}

json split_json(const gguf::GgufFile& file) {
  json files = json::array();
  for (size_t i = 0; i < file.n_parts(); ++i) {
    files.push_back({{"file", file.part_name(i)}, {"file_size", file.part_size(i)}});
  }
  return json{{"n_files", file.n_parts()}, {"files", files}};
}

json tensor_json(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  json j{{"name", t.name},
         {"type", std::string(type_name(t.type))},
         {"shape", t.ne},
         {"bytes", t.n_bytes},
         {"offset", t.offset}};
  if (file.n_parts() > 1) j["split_file"] = t.part;  // index into split.files; offset is within that file
  return j;
}

}  // namespace

nlohmann::json inspect_tensors_report(const gguf::GgufFile& file, const std::string& pattern) {
  std::regex re;
  try {
    re = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    fail("--tensors: '{}' is not a valid regular expression (ECMAScript syntax): {}", pattern, e.what());
  }
  json r;
  r["file"] = file.name();
  r["file_size"] = file.file_size();
  if (file.n_parts() > 1) r["split"] = split_json(file);
  r["pattern"] = pattern;
  r["n_tensors"] = file.tensors().size();
  json tensors = json::array();
  uint64_t bytes = 0;
  for (const auto& t : file.tensors()) {
    if (!std::regex_search(t.name, re)) continue;
    tensors.push_back(tensor_json(file, t));
    bytes += t.n_bytes;
  }
  r["n_matched"] = tensors.size();
  r["matched_bytes"] = bytes;
  r["tensors"] = tensors;
  return r;
}

nlohmann::json inspect_report(const gguf::GgufFile& file, const InspectOptions& options) {
  json r;
  r["file"] = file.name();
  r["file_size"] = file.file_size();
  r["gguf_version"] = file.version();
  r["alignment"] = file.alignment();
  r["data_offset"] = file.data_offset();
  r["n_metadata"] = file.metadata().size();
  r["n_tensors"] = file.tensors().size();
  if (file.n_parts() > 1) r["split"] = split_json(file);

  json md = json::object();
  for (const auto& [key, value] : file.metadata().entries()) md[key] = value_json(value);
  r["metadata"] = md;
  r["tokenizer"] = tokenizer_json(file.metadata());

  json tensors = json::array();
  std::map<std::string, json> type_counts;
  for (const auto& t : file.tensors()) {
    const std::string type(type_name(t.type));
    tensors.push_back(tensor_json(file, t));
    auto& entry = type_counts[type];
    if (entry.is_null()) entry = json{{"count", 0}, {"bytes", 0}};
    entry["count"] = entry["count"].get<int64_t>() + 1;
    entry["bytes"] = entry["bytes"].get<uint64_t>() + t.n_bytes;
  }
  r["tensors"] = tensors;
  r["tensor_types"] = type_counts;

  r["architecture"] = file.metadata().opt_string("general.architecture").value_or("");
  if (file.tensors().empty()) {
    r["model"] = nullptr;
    r["model_note"] = "no tensors: a vocabulary-only file";
    return r;
  }
  try {
    const ModelConfig config = ModelConfig::from_gguf(file);
    const ModelProfile profile = profile_model(file, config);
    const int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min<int64_t>(config.n_ctx_train, 4096);
    const MemoryEstimate mem = estimate_memory(profile, config, n_ctx, options.kv_type);
    r["model"] = config_json(config);
    if (arch_info(config.arch).gemma) r["layers"] = layers_json(config);
    r["totals"] = {{"weight_bytes", profile.weight_bytes},
                   {"n_params", profile.n_params},
                   {"embd_bytes", profile.embd_bytes},
                   {"output_bytes", profile.output_bytes},
                   {"other_bytes", profile.other_bytes},
                   {"per_layer_embd_bytes", profile.per_layer_embd_bytes},
                   {"decode_bytes_per_token", profile.decode_bytes_per_token},
                   {"flops_per_token", profile.flops_per_token}};
    r["bytes_per_layer"] = profile.layer_bytes;
    r["memory"] = {{"n_ctx", n_ctx},
                   {"kv_type", std::string(type_name(options.kv_type))},
                   {"kv_bytes_per_token", kv_bytes_per_token(config, options.kv_type)},
                   {"weights", mem.weights},
                   {"kv_cache", mem.kv_cache},
                   {"kv_layer_types", kv_types_json(config, n_ctx, options.kv_type)},
                   {"compute", mem.compute},
                   {"total", mem.total()}};
  } catch (const Error& e) {
    r["model"] = nullptr;
    r["model_note"] = e.what();
  }
  return r;
}

}  // namespace tessera
