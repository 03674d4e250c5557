// CPU compute kernels behind one small interface, with a scalar reference, AVX2 and AVX-512 variants chosen at
// run time from the CPU's features (one binary is right everywhere). TESSERA_ISA=scalar|avx2|avx512 forces a path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tensor/ggml_type.h"

namespace tessera {

enum class Isa { Scalar, Avx2, Avx512 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false, avx512bf16 = false;
  bool avx_vnni = false;
};

CpuFeatures detect_cpu_features();
std::string_view isa_name(Isa isa);
// The best path this CPU runs (avx512 needs F, BW, VL, DQ and VNNI; avx2 needs AVX2, FMA and F16C).
Isa best_isa(const CpuFeatures& f);
bool isa_supported(Isa isa, const CpuFeatures& f);
// best_isa(), or the TESSERA_ISA environment variable's choice; throws Error if the CPU lacks the forced path.
Isa select_isa();

// Converts an f32 row of n elements to an activation format (Q8_0, Q8_1, Q8_K; F32 copies).
using ActQuantFn = void (*)(const float* x, void* y, int64_t n);
// Dot product of one weight row (n elements) with one activation row in act_type(weight type).
using VecDotFn = float (*)(const void* w, const void* x, int64_t n);
// y[t * ldy + r] = dot(weight row r, activation row t) for r < n_rows, t < n_tok. Rows are w_stride / x_stride
// bytes apart. Implementations reuse each unpacked weight block across several tokens (prefill).
using GemmFn = void (*)(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, size_t x_stride,
                        int64_t n_tok, int64_t k, float* y, int64_t ldy);

// Weights repacked once (at load) into the layout a path's gemm reads fastest, so prefill and batched decode no
// longer rebuild it on every call. Rows are packed in groups of group_rows; a group's size depends only on k, so
// rows [r, ...) of a packed matrix start at group r / group_rows when r is a multiple of group_rows.
struct PackedGemm {
  int group_rows = 0;
  // Below this many tokens the plain gemm (gemv, small-batch kernels) is faster.
  int min_tokens = 0;
  size_t (*group_bytes)(int64_t k) = nullptr;
  // Packs rows [0, n_rows) (rows are w_stride bytes apart) into ceil(n_rows / group_rows) groups at out, which
  // must be 64-byte aligned (group_bytes is a multiple of 64).
  void (*pack)(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t k, uint8_t* out) = nullptr;
  // As GemmFn, for rows [0, n_rows) of the packed groups at p.
  void (*gemm)(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t x_stride, int64_t n_tok, int64_t k, float* y,
               int64_t ldy) = nullptr;
  // Above this many tokens (0: no limit) the next choice is faster (--repack's tiles or the plain gemm).
  int max_tokens = 0;
  // As gemm, without software prefetch for a token at a time, where whether it helps depends on the machine's
  // moment; nullptr where the layout has no such kernel. matmul times a layout's decode kernels and runs the
  // fastest (PrefetchChoice).
  void (*gemm_unprefetched)(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t x_stride, int64_t n_tok,
                            int64_t k, float* y, int64_t ldy) = nullptr;
  // As gemm, asking for the lines ahead into L2 (prefetcht1) where gemm asks into L1 only (prefetchnta): which is
  // faster depends on the CPU (stream_prefetch.h's Reach); nullptr where gemm is the only kernel of its kind.
  void (*gemm_l2)(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t x_stride, int64_t n_tok, int64_t k,
                  float* y, int64_t ldy) = nullptr;
};

struct AttnRows;  // attention_tile.h
struct AttnKeys;

// The SIMD parts of the row operations (vec_ops.h, tensor_ops.h, attention_tile.h) on one path; never null.
struct OpsFns {
  void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n) = nullptr;
  void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n) = nullptr;  // rounding to nearest even
  void (*softmax)(float* x, int64_t n) = nullptr;                        // in place, n > 0
  void (*swiglu)(const float* gate, const float* up, int64_t n, float* out) = nullptr;
  void (*attend)(const AttnRows& rows, const AttnKeys& keys) = nullptr;  // AttnUpdateFn
  void (*softcap)(float* x, int64_t n, float cap) = nullptr;             // x = cap tanh(x / cap), in place
  // out = gelu(gate) * up with gelu looked up by gate's fp16 value in `table` (65536 fp16 entries and one of
  // padding), 0 for gate <= -10 and gate itself for gate >= 10 (tensor_ops.h's GeluTable).
  void (*geglu_table)(const float* gate, const float* up, int64_t n, float* out, const uint16_t* table) = nullptr;
};

// The probe's loops (what memory and arithmetic give this path's kernels), in the path's vectors and with its
// kernels' prefetch. Null on the scalar path: the probe has its own plain loops.
struct StreamProbeFns {
  static constexpr size_t kBlockWords = 64;  // the words each step of a read loop loads (512 bytes)
  // XOR of n 64-bit words (n a multiple of kBlockWords): plain loads; prefetchnta as far ahead as the decode
  // kernels ask; twice as far; and in bursts as the 32-element formats' panels ask.
  uint64_t (*xor_words)(const uint64_t* p, size_t n) = nullptr;
  uint64_t (*xor_words_nta)(const uint64_t* p, size_t n) = nullptr;
  uint64_t (*xor_words_far)(const uint64_t* p, size_t n) = nullptr;
  uint64_t (*xor_words_burst)(const uint64_t* p, size_t n) = nullptr;
  // `iters` iterations of independent multiply-accumulate chains on all-ones inputs; they return the number of
  // multiplies performed (exact for iters <= 2^16).
  uint64_t (*int8_dot)(uint64_t iters) = nullptr;
  uint64_t (*int8_dot_avx_vnni)(uint64_t iters) = nullptr;  // 256-bit vpdpbusd: only where CpuFeatures::avx_vnni
  uint64_t (*f32_fma)(uint64_t iters) = nullptr;
};

class Kernels {
 public:
  Isa isa() const { return isa_; }
  // The activation format for a weight type: F32 for F32/F16/BF16 weights (activations stay f32), else ggml's
  // vec_dot_type (Q8_0, Q8_1 or Q8_K).
  static GgmlType act_type(GgmlType weight);
  ActQuantFn quantize_act(GgmlType act) const;  // never null for Q8_0, Q8_1, Q8_K, F32
  VecDotFn vec_dot(GgmlType weight) const;      // never null for a type with can_dequantize
  GemmFn gemm(GgmlType weight) const;           // never null for a type with can_dequantize
  // The packed layout of this path for a weight type; nullptr where the path has none (the plain gemm is used).
  const PackedGemm* packed(GgmlType weight) const;
  // A layout the weights' copy at load holds in place of the rows (the size of the rows, or a little more), for
  // calls of up to max_tokens tokens; nullptr where the path has none for the type.
  const PackedGemm* panels(GgmlType weight) const;
  const OpsFns& ops() const { return ops_; }
  const StreamProbeFns& stream_probe() const { return stream_probe_; }

  // The kernel set of one path (the path must be supported by the CPU to be called).
  static const Kernels& get(Isa isa);

 private:
  friend struct KernelTables;
  Isa isa_ = Isa::Scalar;
  ActQuantFn quantize_[64] = {};
  VecDotFn dot_[64] = {};
  GemmFn gemm_[64] = {};
  const PackedGemm* packed_[64] = {};
  const PackedGemm* panels_[64] = {};
  OpsFns ops_;
  StreamProbeFns stream_probe_;
};

}  // namespace tessera
