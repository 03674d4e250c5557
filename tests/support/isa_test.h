// Tests that run once per kernel path: a path this CPU lacks is reported as skipped (GTEST_SKIP), never passed.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tensor/kernels.h"

namespace tessera::test {

class IsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam(), detect_cpu_features())) {
      GTEST_SKIP() << "this CPU lacks the " << isa_name(GetParam()) << " path";
    }
  }
  Isa isa() const { return GetParam(); }
};

inline std::string isa_test_name(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

}  // namespace tessera::test

// Instantiates the IsaTest-derived SUITE on the scalar, AVX2 and AVX-512 paths.
#define TESSERA_ISA_TEST_SUITE(SUITE)                                                                               \
  INSTANTIATE_TEST_SUITE_P(Isa, SUITE,                                                                              \
                           ::testing::Values(::tessera::Isa::Scalar, ::tessera::Isa::Avx2, ::tessera::Isa::Avx512), \
                           ::tessera::test::isa_test_name)
