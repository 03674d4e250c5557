// Pieces are generated deterministically (single characters, then "▁"-prefixed and two-letter pieces) so
// synthetic models tokenize ordinary English into a realistic number of tokens.
#include "model/builtin_vocab.h"

#include <fmt/format.h>

#include <string>
#include <unordered_set>
#include <vector>

#include "util/error.h"

namespace tessera {

void write_builtin_vocab(gguf::Metadata& md, int64_t n_vocab) {
  if (n_vocab < 259)
    fail("the built-in vocabulary needs n_vocab >= 259 (3 special + 256 byte tokens), got {}", n_vocab);
  std::vector<gguf::Value> tokens;
  std::vector<gguf::Value> scores;
  std::vector<gguf::Value> types;
  std::unordered_set<std::string> seen;
  auto add = [&](std::string text, int32_t type) {
    seen.insert(text);
    tokens.emplace_back(std::move(text));
    scores.emplace_back(-static_cast<float>(scores.size()));
    types.emplace_back(type);
  };
  add("<unk>", 2);
  add("<s>", 3);
  add("</s>", 3);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 6);

  const std::string space = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
  std::vector<std::string> letters;
  for (char ch = 'a'; ch <= 'z'; ++ch) letters.emplace_back(1, ch);
  std::vector<std::string> candidates = {space};
  for (char ch = 33; ch < 127; ++ch) candidates.emplace_back(1, ch);
  for (const auto& l : letters) candidates.push_back(space + l);
  for (const auto& a : letters) {
    for (const auto& b : letters) candidates.push_back(a + b);
  }
  for (const auto& a : letters) {
    for (const auto& b : letters) candidates.push_back(space + a + b);
  }
  for (size_t i = 0; static_cast<int64_t>(tokens.size()) < n_vocab; ++i) {
    std::string piece = i < candidates.size() ? candidates[i] : fmt::format("{}tok{}", space, i);
    if (!seen.contains(piece)) add(std::move(piece), 1);
  }
  md.set("tokenizer.ggml.model", gguf::Value("llama"));
  md.set("tokenizer.ggml.tokens", gguf::Value::array(gguf::ValueType::STRING, std::move(tokens)));
  md.set("tokenizer.ggml.scores", gguf::Value::array(gguf::ValueType::FLOAT32, std::move(scores)));
  md.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::INT32, std::move(types)));
  md.set("tokenizer.ggml.bos_token_id", gguf::Value(uint32_t{1}));
  md.set("tokenizer.ggml.eos_token_id", gguf::Value(uint32_t{2}));
  md.set("tokenizer.ggml.unknown_token_id", gguf::Value(uint32_t{0}));
  md.set("tokenizer.ggml.add_bos_token", gguf::Value(true));
  md.set("tokenizer.ggml.add_eos_token", gguf::Value(false));
}

}  // namespace tessera
