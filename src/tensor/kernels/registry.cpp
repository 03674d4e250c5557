// Kernels::get and the accessors: per-ISA tables built once from the registrations in registry.h, each entry
// falling back to the next slower path (avx512 -> avx2 -> scalar) where a path has no kernel of its own.
#include "tensor/kernels/registry.h"

#include <cstring>

#include "tensor/kernels.h"
#include "tensor/quant.h"

namespace tessera {

struct KernelTables {
  static Kernels build(Isa isa) {
    Kernels k;
    k.isa_ = isa;
    // The requested path first, then each slower one.
    const kernels::IsaKernels* paths[3] = {};
    int n_paths = 0;
#if (defined(__x86_64__) || defined(__i386__)) && !defined(TESSERA_NO_SIMD_KERNELS)
    if (isa == Isa::Avx512) paths[n_paths++] = &kernels::avx512_kernels();
    if (isa != Isa::Scalar) paths[n_paths++] = &kernels::avx2_kernels();
#endif
    paths[n_paths++] = &kernels::scalar_kernels();
    for (uint32_t id = 0; id < 64; ++id) {
      const auto traits = find_type_traits(id);
      if (!traits) continue;
      const GgmlType t = traits->type;
      ActQuantFn q = nullptr;
      VecDotFn d = nullptr;
      GemmFn g = nullptr;
      // A gemm always comes from the same path as the vec_dot (each path's generic gemm loops over its own
      // vec_dot). Only the requested path and the ones below it are consulted: an avx2 table never holds an
      // avx512 kernel.
      auto offer = [&](ActQuantFn q2, VecDotFn d2, GemmFn g2) {
        if (!q) q = q2;
        if (!d && d2) {
          d = d2;
          g = g2;
        }
      };
      for (int i = 0; i < n_paths; ++i) {
        const kernels::IsaKernels& p = *paths[i];
        offer(p.quantize_act(t), p.vec_dot(t), p.gemm(t));
      }
      k.quantize_[id] = q;
      k.dot_[id] = d;
      k.gemm_[id] = g;
      const kernels::IsaKernels& own = *paths[0];
      if (own.packed) k.packed_[id] = own.packed(t);
      if (own.panels) k.panels_[id] = own.panels(t);
    }
    for (int i = n_paths - 1; i >= 0; --i) {  // slowest first: each faster path overrides what it has
      const OpsFns* o = paths[i]->ops;
      if (o == nullptr) continue;
      if (o->f16_to_f32) k.ops_.f16_to_f32 = o->f16_to_f32;
      if (o->f32_to_f16) k.ops_.f32_to_f16 = o->f32_to_f16;
      if (o->softmax) k.ops_.softmax = o->softmax;
      if (o->swiglu) k.ops_.swiglu = o->swiglu;
      if (o->attend) k.ops_.attend = o->attend;
      if (o->softcap) k.ops_.softcap = o->softcap;
      if (o->geglu_table) k.ops_.geglu_table = o->geglu_table;
    }
    if (paths[0]->stream_probe) k.stream_probe_ = *paths[0]->stream_probe;
    return k;
  }
};

GgmlType Kernels::act_type(GgmlType weight) {
  switch (weight) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
      return GgmlType::F32;
    default:
      return vec_dot_type(weight);
  }
}

ActQuantFn Kernels::quantize_act(GgmlType act) const {
  const auto id = static_cast<uint32_t>(act);
  return id < 64 ? quantize_[id] : nullptr;
}

VecDotFn Kernels::vec_dot(GgmlType weight) const {
  const auto id = static_cast<uint32_t>(weight);
  return id < 64 ? dot_[id] : nullptr;
}

GemmFn Kernels::gemm(GgmlType weight) const {
  const auto id = static_cast<uint32_t>(weight);
  return id < 64 ? gemm_[id] : nullptr;
}

const PackedGemm* Kernels::packed(GgmlType weight) const {
  const auto id = static_cast<uint32_t>(weight);
  return id < 64 ? packed_[id] : nullptr;
}

const PackedGemm* Kernels::panels(GgmlType weight) const {
  const auto id = static_cast<uint32_t>(weight);
  return id < 64 ? panels_[id] : nullptr;
}

// Each table is built on first use of its path only: building one calls its path's lookups, compiled with that
// path's flags.
const Kernels& Kernels::get(Isa isa) {
  switch (isa) {
    case Isa::Avx2: {
      static const Kernels avx2 = KernelTables::build(Isa::Avx2);
      return avx2;
    }
    case Isa::Avx512: {
      static const Kernels avx512 = KernelTables::build(Isa::Avx512);
      return avx512;
    }
    case Isa::Scalar:
      break;
  }
  static const Kernels scalar = KernelTables::build(Isa::Scalar);
  return scalar;
}

}  // namespace tessera
