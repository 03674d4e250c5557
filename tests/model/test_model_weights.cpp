// ModelWeights refuses what it cannot run with a clear message, while the metadata still parses for inspect.
#include <gtest/gtest.h>

#include "gguf/gguf_writer.h"
#include "model/model_weights.h"
#include "model/synthetic_model.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera {
namespace {

TEST(ModelWeights, YarnScalingIsRefusedClearly) {
  test::TempDir dir;
  SyntheticSpec spec;
  spec.config = preset_config("tiny", "qwen2");
  write_synthetic_model(spec, dir / "m.gguf");
  // Copy the file with rope scaling metadata added.
  const auto src = gguf::GgufFile::open(dir / "m.gguf");
  gguf::GgufWriter w;
  w.metadata() = src.metadata();
  w.set("qwen2.rope.scaling.type", gguf::Value("yarn"));
  w.set("qwen2.rope.scaling.factor", gguf::Value(4.0f));
  for (const auto& t : src.tensors()) {
    const auto data = src.tensor_data(t);
    w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(data.begin(), data.end()));
  }
  w.write(dir / "yarn.gguf");
  try {
    ModelWeights::load(dir / "yarn.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("YaRN rope scaling is not supported"), std::string::npos) << e.what();
  }
  // The same metadata parses for inspect (the scaling is reported, not hidden).
  const auto yarn = gguf::GgufFile::open(dir / "yarn.gguf");
  const auto c = ModelConfig::from_gguf(yarn);
  EXPECT_EQ(c.rope_scaling, RopeScaling::Yarn);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.25f);
}

}  // namespace
}  // namespace tessera
