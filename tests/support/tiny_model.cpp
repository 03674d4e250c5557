// write_tiny_model: the SyntheticSpec every test that needs a small model of some architecture and type fills in;
// random_tiny_llama: the one most server and sampling tests share.
#include "support/tiny_model.h"

#include "model/synthetic_model.h"
#include "support/test_paths.h"

namespace tessera::test {

void write_tiny_model(const std::filesystem::path& path, const std::string& arch, const std::string& type) {
  SyntheticSpec spec;
  spec.config = preset_config("tiny", arch);
  spec.type = type;
  spec.threads = 1;
  write_synthetic_model(spec, path);
}

std::string random_tiny_llama() {
  static const TempDir dir;
  const auto path = dir / "tiny-llama.gguf";
  if (!std::filesystem::exists(path)) write_tiny_model(path, "llama", "f32");
  return path.string();
}

}  // namespace tessera::test
