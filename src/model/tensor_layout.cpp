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

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
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
