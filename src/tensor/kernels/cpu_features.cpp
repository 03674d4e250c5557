// The paths' requirements, the best one a CPU runs and the TESSERA_ISA override; detect_cpu_features itself is
// per architecture (x86/cpu_features.cpp; other CPUs report no x86 features and run the scalar path).
#include <cstdlib>
#include <string>

#include "tensor/kernels.h"
#include "util/error.h"

namespace tessera {

#if !defined(__x86_64__) && !defined(__i386__)
CpuFeatures detect_cpu_features() { return {}; }
#endif

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  return "scalar";
}

bool isa_supported(Isa isa, const CpuFeatures& f) {
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
      return f.avx2 && f.fma && f.f16c;
    case Isa::Avx512:
      return f.avx2 && f.fma && f.f16c && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni;
  }
  return false;
}

Isa best_isa(const CpuFeatures& f) {
  if (isa_supported(Isa::Avx512, f)) return Isa::Avx512;
  if (isa_supported(Isa::Avx2, f)) return Isa::Avx2;
  return Isa::Scalar;
}

Isa select_isa() {
  const CpuFeatures f = detect_cpu_features();
  const char* forced = std::getenv("TESSERA_ISA");
  if (forced == nullptr || *forced == '\0') return best_isa(f);
  const std::string name(forced);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (name != isa_name(isa)) continue;
    if (!isa_supported(isa, f)) fail("TESSERA_ISA={}: this CPU does not support that instruction set", name);
    return isa;
  }
  fail("TESSERA_ISA={} is not one of scalar, avx2, avx512", name);
}

}  // namespace tessera
