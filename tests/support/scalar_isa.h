// Including this pins the scalar kernels for the whole test binary and the processes it starts (they inherit the
// environment): TESSERA_ISA=scalar is set before any test runs, since the kernel choice is made once per process.
// The scalar kernels compute each row the same way whatever the batch or the process; the SIMD kernels tile batch
// sizes differently and round differently, which can flip a low-margin token. They are checked against the scalar
// ones in tests/kernels and tests/model.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

namespace tessera::test {

class ScalarIsaEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { setenv("TESSERA_ISA", "scalar", 1); }
};
inline const ::testing::Environment* const kScalarIsa = ::testing::AddGlobalTestEnvironment(new ScalarIsaEnvironment);

}  // namespace tessera::test
