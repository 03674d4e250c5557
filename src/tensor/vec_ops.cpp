// VecOps: each path's f16 conversions and attention update, taken from the kernels' table (OpsFns), so the SIMD
// versions live with the other kernels of their path; callers only reach a version the CPU supports.
#include "tensor/vec_ops.h"

namespace tessera {
namespace {

VecOps from_table(Isa isa) {
  const OpsFns& o = Kernels::get(isa).ops();
  return {o.f16_to_f32, o.f32_to_f16, o.attend};
}

}  // namespace

const VecOps& VecOps::get(Isa isa) {
  switch (isa) {  // each built on first use of its path only, as Kernels::get's tables
    case Isa::Avx512: {
      static const VecOps avx512 = from_table(Isa::Avx512);
      return avx512;
    }
    case Isa::Avx2: {
      static const VecOps avx2 = from_table(Isa::Avx2);
      return avx2;
    }
    case Isa::Scalar:
      break;
  }
  static const VecOps scalar = from_table(Isa::Scalar);
  return scalar;
}

}  // namespace tessera
