// Every #include in src/ against the layering rules, and the checker itself on small trees that break them.
#include <gtest/gtest.h>

#include <fstream>

#include "layering/include_rules.h"
#include "support/test_paths.h"

namespace tessera::test {
namespace {

namespace fs = std::filesystem;

void write_source(const fs::path& root, const std::string& rel, const std::string& text) {
  fs::create_directories((root / rel).parent_path());
  std::ofstream(root / rel) << text;
}

TEST(Layering, EveryIncludeInSrcFollowsTheLayers) {
  const auto violations = check_includes(source_dir() / "src", tessera_include_rules());
  std::string all;
  for (const auto& v : violations) all += describe(v) + "\n";
  EXPECT_TRUE(violations.empty()) << all;
}

TEST(Layering, EveryFolderOfSrcHasALayer) {
  const IncludeRules rules = tessera_include_rules();
  for (const auto& entry : fs::directory_iterator(source_dir() / "src")) {
    if (!entry.is_directory()) continue;
    EXPECT_TRUE(rules.may_include.contains(entry.path().filename().string()))
        << entry.path() << " is missing from tessera_include_rules()";
  }
}

TEST(Layering, ABackEdgeIsReportedWithFileAndLine) {
  TempDir dir;
  write_source(dir.path(), "util/log.h", "#pragma once\n#include <string>\n");
  write_source(dir.path(), "engine/run.h", "#include \"util/log.h\"\n");
  write_source(dir.path(), "tensor/ops.cpp", "// ops\n#include \"util/log.h\"\n#include \"engine/run.h\"\n");
  const auto v = check_includes(dir.path(), tessera_include_rules());
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].file, "tensor/ops.cpp");
  EXPECT_EQ(v[0].line, 3);
  EXPECT_EQ(v[0].include, "engine/run.h");
  EXPECT_NE(describe(v[0]).find("layer 'tensor' may not depend on layer 'engine'"), std::string::npos);
}

TEST(Layering, PrivateKernelHeadersStayInsideTensor) {
  TempDir dir;
  write_source(dir.path(), "tensor/matmul.cpp", "#include \"tensor/kernels/x86/avx2/common.h\"\n");
  write_source(dir.path(), "hw/probe.cpp", "#include \"tensor/kernels.h\"\n#include \"tensor/kernels/registry.h\"\n");
  const auto v = check_includes(dir.path(), tessera_include_rules());
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].file, "hw/probe.cpp");
  EXPECT_EQ(v[0].line, 2);
}

TEST(Layering, IsaHeadersStayInTheIsaFolders) {
  TempDir dir;
  write_source(dir.path(), "tensor/kernels/x86/avx2/gemm.cpp", "#include <immintrin.h>\n#include <cpuid.h>\n");
  write_source(dir.path(), "tensor/vec_ops.cpp", "#include <vector>\n#include <immintrin.h>\n");
  const auto v = check_includes(dir.path(), tessera_include_rules());
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].file, "tensor/vec_ops.cpp");
  EXPECT_EQ(v[0].include, "immintrin.h");
}

TEST(Layering, AFolderWithoutALayerIsReported) {
  TempDir dir;
  write_source(dir.path(), "misc/a.cpp", "#include \"util/log.h\"\n");
  const auto v = check_includes(dir.path(), tessera_include_rules());
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].why.find("no place in the layering rules"), std::string::npos);
}

}  // namespace
}  // namespace tessera::test
