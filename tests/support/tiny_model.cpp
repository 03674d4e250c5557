// write_tiny_model: the SyntheticSpec every test that needs a small model of some architecture and type fills in.
#include "support/tiny_model.h"

#include "model/synthetic_model.h"

namespace tessera::test {

void write_tiny_model(const std::filesystem::path& path, const std::string& arch, const std::string& type) {
  SyntheticSpec spec;
  spec.config = preset_config("tiny", arch);
  spec.type = type;
  spec.threads = 1;
  write_synthetic_model(spec, path);
}

}  // namespace tessera::test
