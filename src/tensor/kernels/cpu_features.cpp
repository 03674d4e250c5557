// CPU feature detection (cpuid + xgetbv: the OS must save the wide registers) and the TESSERA_ISA override.
#include <cpuid.h>

#include <cstdlib>
#include <string>

#include "tensor/kernels.h"
#include "util/error.h"

namespace tessera {
namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

}  // namespace

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const bool avx = (c >> 28) & 1;
  f.fma = (c >> 12) & 1;
  f.f16c = (c >> 29) & 1;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;
  if (!ymm_state) return f;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = (b >> 5) & 1;
  if (zmm_state) {
    f.avx512f = (b >> 16) & 1;
    f.avx512dq = (b >> 17) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512vnni = (c >> 11) & 1;
  }
  unsigned a1, b1, c1, d1;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) {
    f.avx_vnni = (a1 >> 4) & 1;
    f.avx512bf16 = zmm_state && ((a1 >> 5) & 1);
  }
  return f;
}

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
