// Builds the per-architecture tensor list from the hyperparameters (names follow llama.cpp's GGUF conventions).
#include "model/tensor_layout.h"

#include <charconv>

namespace tessera {

std::string layer_tensor_name(int64_t layer, const std::string& suffix) {
  return "blk." + std::to_string(layer) + "." + suffix;
}

int64_t layer_of_tensor(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  const char* begin = name.data() + 4;
  const char* end = name.data() + name.size();
  int64_t layer = -1;
  auto [ptr, ec] = std::from_chars(begin, end, layer);
  if (ec != std::errc() || ptr == begin || ptr == end || *ptr != '.') return -1;
  return layer;
}

namespace {

// Gemma 3 and 4 (README_gemma.md section 2 lists them in file order, which this follows).
std::vector<TensorSpec> gemma_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> out;
  auto global = [&](std::string name, TensorRole role, std::vector<int64_t> ne, bool vec, bool optional) {
    out.push_back({std::move(name), role, -1, std::move(ne), vec, optional});
  };
  const bool gemma4 = c.arch == Arch::Gemma4;
  bool any_global = false;
  for (int64_t l = 0; l < c.n_layer; ++l) any_global = any_global || !c.layer(l).is_swa();
  if (gemma4 && any_global) global("rope_freqs.weight", TensorRole::RopeFreqs, {c.n_rot / 2}, true, false);
  global("token_embd.weight", TensorRole::TokenEmbd, {c.n_embd, c.n_vocab}, false, false);
  const int64_t n_pl = gemma4 ? c.n_embd_per_layer : 0;
  if (n_pl > 0) {
    global("per_layer_token_embd.weight", TensorRole::PerLayerTokEmbd, {n_pl * c.n_layer, c.n_vocab}, false, false);
    global("per_layer_model_proj.weight", TensorRole::PerLayerProj, {c.n_embd, n_pl * c.n_layer}, false, false);
    global("per_layer_proj_norm.weight", TensorRole::PerLayerProjNorm, {n_pl}, true, false);
  }
  global("output_norm.weight", TensorRole::OutputNorm, {c.n_embd}, true, false);

  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerShape s = c.layer(l);
    auto add = [&](const std::string& suffix, TensorRole role, std::vector<int64_t> ne, bool vec) {
      out.push_back({layer_tensor_name(l, suffix), role, l, std::move(ne), vec, false});
    };
    const bool own_kv = s.kv_source == l;
    add("attn_norm.weight", TensorRole::AttnNorm, {c.n_embd}, true);
    add("attn_q.weight", TensorRole::AttnQ, {c.n_embd, s.n_embd_q()}, false);
    if (own_kv) add("attn_k.weight", TensorRole::AttnK, {c.n_embd, s.n_embd_k()}, false);
    if (own_kv && s.has_v) add("attn_v.weight", TensorRole::AttnV, {c.n_embd, s.n_embd_v()}, false);
    add("attn_q_norm.weight", TensorRole::AttnQNorm, {s.head_dim}, true);
    if (own_kv) add("attn_k_norm.weight", TensorRole::AttnKNorm, {s.head_dim}, true);
    add("attn_output.weight", TensorRole::AttnOut, {s.n_head * s.head_dim_v, c.n_embd}, false);
    add("post_attention_norm.weight", TensorRole::PostAttnNorm, {c.n_embd}, true);
    add("ffn_norm.weight", TensorRole::FfnNorm, {c.n_embd}, true);
    add("ffn_gate.weight", TensorRole::FfnGate, {c.n_embd, s.n_ff}, false);
    add("ffn_up.weight", TensorRole::FfnUp, {c.n_embd, s.n_ff}, false);
    add("ffn_down.weight", TensorRole::FfnDown, {s.n_ff, c.n_embd}, false);
    if (s.moe) {
      add("ffn_gate_inp.weight", TensorRole::FfnGateInp, {c.n_embd, c.n_expert}, false);
      add("ffn_gate_inp.scale", TensorRole::FfnGateInpScale, {c.n_embd}, true);
      add("post_ffw_norm_1.weight", TensorRole::PostFfnNorm1, {c.n_embd}, true);
      add("pre_ffw_norm_2.weight", TensorRole::PreFfnNorm2, {c.n_embd}, true);
      add("ffn_gate_up_exps.weight", TensorRole::FfnGateUpExps, {c.n_embd, 2 * c.n_ff_exp, c.n_expert}, false);
      add("ffn_down_exps.weight", TensorRole::FfnDownExps, {c.n_ff_exp, c.n_embd, c.n_expert}, false);
      add("ffn_down_exps.scale", TensorRole::FfnDownExpsScale, {c.n_expert}, true);
      add("post_ffw_norm_2.weight", TensorRole::PostFfnNorm2, {c.n_embd}, true);
    }
    add("post_ffw_norm.weight", TensorRole::PostFfnNorm, {c.n_embd}, true);
    if (n_pl > 0) {
      add("inp_gate.weight", TensorRole::PleGate, {c.n_embd, n_pl}, false);
      add("proj.weight", TensorRole::PleProj, {n_pl, c.n_embd}, false);
      add("post_norm.weight", TensorRole::PleNorm, {c.n_embd}, true);
    }
    if (gemma4) add("layer_output_scale.weight", TensorRole::LayerOutScale, {1}, true);
  }
  global("output.weight", TensorRole::Output, {c.n_embd, c.n_vocab}, false, c.tied_output);
  return out;
}

}  // namespace

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  if (arch_info(c.arch).gemma) return gemma_tensors(c);
  const ArchInfo& info = arch_info(c.arch);
  std::vector<TensorSpec> out;
  auto global = [&](std::string name, TensorRole role, std::vector<int64_t> ne, bool vec, bool optional) {
    out.push_back({std::move(name), role, -1, std::move(ne), vec, optional});
  };
  global("token_embd.weight", TensorRole::TokenEmbd, {c.n_embd, c.n_vocab}, false, false);
  if (c.has_rope_freqs) global("rope_freqs.weight", TensorRole::RopeFreqs, {c.n_rot / 2}, true, true);

  for (int64_t l = 0; l < c.n_layer; ++l) {
    auto add = [&](const std::string& suffix, TensorRole role, std::vector<int64_t> ne, bool vec) {
      out.push_back({layer_tensor_name(l, suffix), role, l, std::move(ne), vec, false});
    };
    add("attn_norm.weight", TensorRole::AttnNorm, {c.n_embd}, true);
    add("attn_q.weight", TensorRole::AttnQ, {c.n_embd, c.n_embd_q()}, false);
    add("attn_k.weight", TensorRole::AttnK, {c.n_embd, c.n_embd_k()}, false);
    add("attn_v.weight", TensorRole::AttnV, {c.n_embd, c.n_embd_v()}, false);
    if (info.attn_bias) {
      add("attn_q.bias", TensorRole::AttnQBias, {c.n_embd_q()}, true);
      add("attn_k.bias", TensorRole::AttnKBias, {c.n_embd_k()}, true);
      add("attn_v.bias", TensorRole::AttnVBias, {c.n_embd_v()}, true);
    }
    if (info.qk_norm) {
      add("attn_q_norm.weight", TensorRole::AttnQNorm, {c.head_dim}, true);
      add("attn_k_norm.weight", TensorRole::AttnKNorm, {c.head_dim}, true);
    }
    add("attn_output.weight", TensorRole::AttnOut, {c.n_head * c.head_dim_v, c.n_embd}, false);
    add("ffn_norm.weight", TensorRole::FfnNorm, {c.n_embd}, true);
    if (c.is_moe()) {
      add("ffn_gate_inp.weight", TensorRole::FfnGateInp, {c.n_embd, c.n_expert}, false);
      add("ffn_gate_exps.weight", TensorRole::FfnGateExps, {c.n_embd, c.n_ff_exp, c.n_expert}, false);
      add("ffn_up_exps.weight", TensorRole::FfnUpExps, {c.n_embd, c.n_ff_exp, c.n_expert}, false);
      add("ffn_down_exps.weight", TensorRole::FfnDownExps, {c.n_ff_exp, c.n_embd, c.n_expert}, false);
    } else {
      add("ffn_gate.weight", TensorRole::FfnGate, {c.n_embd, c.n_ff}, false);
      add("ffn_up.weight", TensorRole::FfnUp, {c.n_embd, c.n_ff}, false);
      add("ffn_down.weight", TensorRole::FfnDown, {c.n_ff, c.n_embd}, false);
    }
  }
  global("output_norm.weight", TensorRole::OutputNorm, {c.n_embd}, true, false);
  global("output.weight", TensorRole::Output, {c.n_embd, c.n_vocab}, false, c.tied_output);
  return out;
}

}  // namespace tessera
