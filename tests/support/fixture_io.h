// Reading the model fixtures' references (shared/fixtures/models: JSON and f32 logits) in the forward-pass tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

namespace tessera::test {

inline nlohmann::json load_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// The first index of the largest value (llama.cpp's greedy rule: the first index wins ties).
inline int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

// A fixture's .logits.f32: rows x n_vocab little-endian floats.
inline std::vector<float> read_logits(const std::filesystem::path& p, size_t n) {
  std::ifstream in(p, std::ios::binary);
  std::vector<float> v(n);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (!in) v.clear();
  return v;
}

}  // namespace tessera::test
