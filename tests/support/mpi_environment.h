// The environment of tests that start ranks with mpirun or srun: as root mpirun needs both OMPI_ALLOW_* variables,
// containers lack the CMA single-copy mechanism, and the scalar kernels keep one node and the ranks on the same
// arithmetic (srun passes the environment on to its tasks).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

namespace tessera::test {

class MpiTestEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    setenv("TESSERA_ISA", "scalar", 1);
  }
};

}  // namespace tessera::test
