// Test models: a tiny synthetic GGUF (gen-model's "tiny" preset) written into a test's scratch folder.
#pragma once

#include <filesystem>
#include <string>

namespace tessera::test {

// Writes the "tiny" preset of `arch` with weights of `type` (a gen-model mix name) to `path`, on one thread.
void write_tiny_model(const std::filesystem::path& path, const std::string& arch, const std::string& type);

// The path of the tiny llama with random f32 weights, written on the first call into a scratch folder that lives
// as long as the test process.
std::string random_tiny_llama();

}  // namespace tessera::test
