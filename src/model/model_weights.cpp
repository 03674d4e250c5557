// Loads and validates tensors: every expected tensor present with its exact shape and a type Tessera computes with.
#include "model/model_weights.h"

#include <cstring>
#include <map>
#include <span>

#include "model/tensor_layout.h"
#include "tensor/quant.h"
#include "util/error.h"

namespace tessera {
namespace {

class Loader {
 public:
  Loader(const gguf::TensorSource& file, const ModelConfig& config) : file_(file) {
    for (auto& spec : expected_tensors(config)) specs_.emplace(spec.name, std::move(spec));
  }

  TensorView matrix(const std::string& name) const {
    const gguf::TensorInfo& t = checked(name);
    TensorView v;
    v.type = t.type;
    for (size_t d = 0; d < t.ne.size(); ++d) v.ne[d] = t.ne[d];
    v.data = file_.tensor_data(t).data();
    v.row_bytes = row_size(t.type, t.ne[0]);
    return v;
  }

  std::vector<float> vector(const std::string& name) const {
    const gguf::TensorInfo& t = checked(name);
    std::vector<float> out(static_cast<size_t>(t.n_elements()));
    dequantize_row(t.type, file_.tensor_data(t).data(), out.data(), t.n_elements());
    return out;
  }

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

 private:
  const gguf::TensorInfo& checked(const std::string& name) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) fail("{}: tensor '{}' is missing", file_.name(), name);
    auto spec = specs_.find(name);
    if (spec != specs_.end() && t->ne != spec->second.ne) {
      fail("{}: tensor '{}' has shape {}, expected {}", file_.name(), name, shape(t->ne), shape(spec->second.ne));
    }
    if (!type_traits(t->type).can_dequantize) {
      fail(
          "{}: tensor '{}' has type {}, which Tessera cannot compute with (supported: f32, f16, bf16, q4_0, q4_1, "
          "q5_0, q5_1, q8_0, q2_K..q6_K, iq4_nl, iq4_xs)",
          file_.name(), name, type_name(t->type));
    }
    return *t;
  }

  static std::string shape(const std::vector<int64_t>& ne) {
    std::string s = "[";
    for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
  }

  const gguf::TensorSource& file_;
  std::unordered_map<std::string, TensorSpec> specs_;
};

// A Gemma layer (README_gemma.md section 2): a layer that reuses an earlier layer's K/V has no K, V or k-norm; a
// Gemma 4 global layer may have no V (V is then the raw K).
void load_gemma_layer(const Loader& ld, const ModelConfig& c, int64_t l, LayerWeights& lw) {
  auto n = [l](const char* suffix) { return layer_tensor_name(l, suffix); };
  const LayerShape s = c.layer(l);
  lw.attn_norm = ld.vector(n("attn_norm.weight"));
  lw.wq = ld.matrix(n("attn_q.weight"));
  lw.q_norm = ld.vector(n("attn_q_norm.weight"));
  if (s.kv_source == l) {
    lw.wk = ld.matrix(n("attn_k.weight"));
    lw.k_norm = ld.vector(n("attn_k_norm.weight"));
    if (c.arch == Arch::Gemma3 || ld.has(n("attn_v.weight"))) lw.wv = ld.matrix(n("attn_v.weight"));
  }
  lw.wo = ld.matrix(n("attn_output.weight"));
  lw.post_attn_norm = ld.vector(n("post_attention_norm.weight"));
  lw.ffn_norm = ld.vector(n("ffn_norm.weight"));
  lw.ffn_gate = ld.matrix(n("ffn_gate.weight"));
  lw.ffn_up = ld.matrix(n("ffn_up.weight"));
  lw.ffn_down = ld.matrix(n("ffn_down.weight"));
  lw.post_ffn_norm = ld.vector(n("post_ffw_norm.weight"));
  if (c.arch != Arch::Gemma4) return;
  if (s.moe) {
    lw.ffn_gate_inp = ld.matrix(n("ffn_gate_inp.weight"));
    lw.ffn_gate_inp_scale = ld.vector(n("ffn_gate_inp.scale"));
    lw.post_ffn_norm_1 = ld.vector(n("post_ffw_norm_1.weight"));
    lw.pre_ffn_norm_2 = ld.vector(n("pre_ffw_norm_2.weight"));
    lw.ffn_gate_up_exps = ld.matrix(n("ffn_gate_up_exps.weight"));
    lw.ffn_down_exps = ld.matrix(n("ffn_down_exps.weight"));
    if (ld.has(n("ffn_down_exps.scale"))) lw.ffn_down_exps_scale = ld.vector(n("ffn_down_exps.scale"));
    lw.post_ffn_norm_2 = ld.vector(n("post_ffw_norm_2.weight"));
  }
  if (c.n_embd_per_layer > 0) {
    lw.ple_gate = ld.matrix(n("inp_gate.weight"));
    lw.ple_proj = ld.matrix(n("proj.weight"));
    lw.ple_norm = ld.vector(n("post_norm.weight"));
  }
  lw.layer_out_scale = ld.vector(n("layer_output_scale.weight")).at(0);
}

}  // namespace

std::shared_ptr<const ModelWeights> ModelWeights::load(const std::filesystem::path& path) {
  return load(path, LayerRange{0, -1}, true, true);
}

const gguf::GgufFile& ModelWeights::file() const {
  const auto* file = dynamic_cast<const gguf::GgufFile*>(source_.get());
  if (file == nullptr) fail("{}: the weights were not loaded from a GGUF file", source_->name());
  return *file;
}

std::shared_ptr<const ModelWeights> ModelWeights::load(const std::filesystem::path& path, LayerRange layers,
                                                       bool with_embedding, bool with_head) {
  return load(std::make_shared<const gguf::GgufFile>(gguf::GgufFile::open(path)), layers, with_embedding, with_head);
}

std::shared_ptr<const ModelWeights> ModelWeights::load(std::shared_ptr<const gguf::TensorSource> source,
                                                       LayerRange layers, bool with_embedding, bool with_head) {
  const std::string path = source->name();
  auto w = std::shared_ptr<ModelWeights>(new ModelWeights(std::move(source)));
  w->config_ = ModelConfig::from_gguf(*w->source_);
  const ModelConfig& c = w->config_;
  if (layers.end < 0) layers.end = c.n_layer;
  if (layers.begin < 0 || layers.begin > layers.end || layers.end > c.n_layer) {
    fail("{}: layer range {}-{} is outside the model's {} layers", path, layers.begin, layers.end - 1, c.n_layer);
  }
  if (c.rope_scaling == RopeScaling::Yarn) {
    fail("{}: YaRN rope scaling is not supported yet (rope.scaling.type = yarn)", path);
  }
  w->layers_ = layers;
  Loader ld(*w->source_, c);
  const ArchInfo& info = arch_info(c.arch);
  for (int64_t l = layers.begin; l < layers.end; ++l) {
    auto n = [l](const char* suffix) { return layer_tensor_name(l, suffix); };
    LayerWeights lw;
    lw.shape = c.layer(l);
    if (info.gemma) {
      load_gemma_layer(ld, c, l, lw);
      w->layer_weights_.push_back(std::move(lw));
      continue;
    }
    lw.attn_norm = ld.vector(n("attn_norm.weight"));
    lw.ffn_norm = ld.vector(n("ffn_norm.weight"));
    lw.wq = ld.matrix(n("attn_q.weight"));
    lw.wk = ld.matrix(n("attn_k.weight"));
    lw.wv = ld.matrix(n("attn_v.weight"));
    lw.wo = ld.matrix(n("attn_output.weight"));
    if (info.attn_bias) {
      lw.q_bias = ld.vector(n("attn_q.bias"));
      lw.k_bias = ld.vector(n("attn_k.bias"));
      lw.v_bias = ld.vector(n("attn_v.bias"));
    }
    if (info.qk_norm) {
      lw.q_norm = ld.vector(n("attn_q_norm.weight"));
      lw.k_norm = ld.vector(n("attn_k_norm.weight"));
    }
    if (c.is_moe()) {
      lw.ffn_gate_inp = ld.matrix(n("ffn_gate_inp.weight"));
      lw.ffn_gate_exps = ld.matrix(n("ffn_gate_exps.weight"));
      lw.ffn_up_exps = ld.matrix(n("ffn_up_exps.weight"));
      lw.ffn_down_exps = ld.matrix(n("ffn_down_exps.weight"));
    } else {
      lw.ffn_gate = ld.matrix(n("ffn_gate.weight"));
      lw.ffn_up = ld.matrix(n("ffn_up.weight"));
      lw.ffn_down = ld.matrix(n("ffn_down.weight"));
    }
    w->layer_weights_.push_back(std::move(lw));
  }
  if (ld.has("rope_freqs.weight")) w->rope_factors_ = ld.vector("rope_freqs.weight");
  if (with_embedding || (with_head && c.tied_output)) w->token_embd_ = ld.matrix("token_embd.weight");
  if (with_embedding && c.arch == Arch::Gemma4 && c.n_embd_per_layer > 0) {
    w->per_layer_tok_embd_ = ld.matrix("per_layer_token_embd.weight");
    w->per_layer_proj_ = ld.matrix("per_layer_model_proj.weight");
    w->per_layer_proj_norm_ = ld.vector("per_layer_proj_norm.weight");
  }
  if (with_head) {
    w->output_norm_ = ld.vector("output_norm.weight");
    w->output_ = c.tied_output ? w->token_embd_ : ld.matrix("output.weight");
  }
  if (!with_embedding) w->token_embd_ = TensorView{};
  return w;
}

template <class Self, class Fn>
void ModelWeights::for_each_matrix(Self& self, Fn&& fn) {
  for (auto& lw : self.layer_weights_) {
    for (auto* v :
         {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.ffn_gate, &lw.ffn_up, &lw.ffn_down, &lw.ffn_gate_inp, &lw.ffn_gate_exps,
          &lw.ffn_up_exps, &lw.ffn_down_exps, &lw.ffn_gate_up_exps, &lw.ple_gate, &lw.ple_proj}) {
      fn(*v);
    }
  }
  fn(self.per_layer_proj_);
  // The embedding is only looked up by row: packing it would be memory for nothing (unless it is the tied head).
  fn(self.output_);
}

uint64_t ModelWeights::packed_bytes_for(const Kernels& kernels) const {
  uint64_t total = 0;
  for_each_matrix(*this, [&](const TensorView& v) { total += PackedWeights::bytes_for(v, kernels); });
  return total;
}

std::shared_ptr<const ModelWeights> ModelWeights::packed(const std::shared_ptr<const ModelWeights>& weights,
                                                         const Kernels& kernels, ThreadPool& pool) {
  auto w = std::shared_ptr<ModelWeights>(new ModelWeights(*weights));
  auto packed = std::make_shared<PackedWeights>();
  for_each_matrix(*w, [&](TensorView& v) { packed->pack(v, kernels, pool); });
  w->packed_ = std::move(packed);
  return w;
}

namespace {

// One tensor's place in the weights' copy.
struct CopySpan {
  const TensorView* src;
  const PackedGemm* panels;
  size_t offset;
  size_t bytes;
};

// Each tensor once (a tied head shares the embedding's bytes: found by address): its rows copied, or for a matrix
// the kernels keep as panels, the panels instead. The rows of those stay readable in the file mapping for the rare
// reader of rows (a slice not on a panel boundary), so the matrix costs memory once. index: data -> span.
std::vector<CopySpan> copy_layout(std::span<const TensorView* const> views, const uint8_t* embedding,
                                  const Kernels& kernels, std::map<const uint8_t*, size_t>& index, size_t& total) {
  std::vector<CopySpan> spans;
  total = 0;
  for (const TensorView* v : views) {
    if (v->empty() || index.count(v->data) != 0) continue;
    const PackedGemm* panels = v->data == embedding ? nullptr : kernels.panels(v->type);
    const size_t bytes =
        panels != nullptr ? PackedWeights::panel_bytes(*v, *panels) : static_cast<size_t>(v->rows()) * v->row_bytes;
    index[v->data] = spans.size();
    spans.push_back({v, panels, total, bytes});
    total += (bytes + 63) / 64 * 64;
  }
  return spans;
}

}  // namespace

uint64_t ModelWeights::copied_bytes_for(const Kernels& kernels) const {
  std::vector<const TensorView*> views;
  for_each_matrix(*this, [&](const TensorView& v) { views.push_back(&v); });
  views.push_back(&token_embd_);
  std::map<const uint8_t*, size_t> index;
  size_t total = 0;
  copy_layout(views, token_embd_.data, kernels, index, total);
  return total;
}

std::shared_ptr<const ModelWeights> ModelWeights::copied(const std::shared_ptr<const ModelWeights>& weights,
                                                         const Kernels& kernels, ThreadPool& pool) {
  auto w = std::shared_ptr<ModelWeights>(new ModelWeights(*weights));
  std::vector<TensorView*> views;
  for_each_matrix(*w, [&](TensorView& v) { views.push_back(&v); });
  views.push_back(&w->token_embd_);
  std::map<const uint8_t*, size_t> index;
  size_t total = 0;
  const std::vector<CopySpan> spans = copy_layout(std::vector<const TensorView*>(views.begin(), views.end()),
                                                  w->token_embd_.data, kernels, index, total);
  auto buffer = std::make_shared<HugeBuffer>(total);
  uint8_t* base = buffer->data();
  pool.parallel_for(static_cast<int64_t>(spans.size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const CopySpan& s = spans[static_cast<size_t>(i)];
      if (s.panels == nullptr) std::memcpy(base + s.offset, s.src->data, s.bytes);
    }
  });
  for (const CopySpan& s : spans) {
    if (s.panels != nullptr) PackedWeights::write_panels(*s.src, *s.panels, base + s.offset, pool);
  }
  for (TensorView* v : views) {
    if (v->empty()) continue;
    const CopySpan& s = spans[index.at(v->data)];
    if (s.panels != nullptr) {
      v->panels = PackedWeights::rows_at(*v, *s.panels, base + s.offset);
    } else {
      v->data = base + s.offset;
    }
  }
  w->copy_ = std::move(buffer);
  return w;
}

}  // namespace tessera
