// BPE pre-tokenization: the regex sets llama.cpp applies per `tokenizer.ggml.pre` value, compiled with PCRE2
// (UTF + Unicode properties) once per tokenizer, splitting text into the words that BPE merges within.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

struct PreTokenizerConfig {
  std::string_view name;                  // canonical name, e.g. "llama3"
  std::vector<std::string_view> regexes;  // applied in sequence; see PreTokenizer::split
  bool ignore_merges = false;             // a word that is already a token is emitted whole (llama3, tekken)
  bool add_bos = false;                   // llama.cpp's add_bos default for this pre-tokenizer
};

// The configuration for a `tokenizer.ggml.pre` value ("" when the key is absent, meaning "default").
// Throws Error listing the supported names for an unknown value.
const PreTokenizerConfig& pre_tokenizer_config(std::string_view pre);

class PreTokenizer {
 public:
  explicit PreTokenizer(const PreTokenizerConfig& config);  // compiles the regexes; throws Error on failure
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Splits `text` into words (views into it) covering every byte in order. Each regex in turn splits every
  // current word into its matches and the unmatched runs between them (Hugging Face's "isolated" split).
  // Invalid UTF-8 never matches and so stays in the unmatched runs.
  std::vector<std::string_view> split(std::string_view text) const;

  const PreTokenizerConfig& config() const { return *config_; }

 private:
  class Regex;
  const PreTokenizerConfig* config_;
  std::vector<Regex> regexes_;
};

}  // namespace tessera
