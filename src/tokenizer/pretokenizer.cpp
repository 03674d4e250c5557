// PCRE2-backed pre-tokenizer: the regex table per `tokenizer.ggml.pre` value and the sequential split.
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <pcre2.h>

#include <array>
#include <utility>

#include "util/error.h"

namespace tessera {

namespace {

// The GPT-2 pattern, without Hugging Face's final "|\s+": a lone whitespace character before a word is then left
// unmatched, which the split keeps as a word of its own anyway.
constexpr std::string_view kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr std::string_view kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*)re"
    R"re(|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*)re"
    R"re(|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kTekken =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)re"
    R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)re"
    R"re(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)re"
    R"re(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)re"
    R"re(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kDeepseekV3Words =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)re"
    R"re(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// DeepSeek LLM spells out its cased-letter class range by range (Latin, Greek, Cyrillic, Armenian, Georgian,
// Cherokee, letterlike symbols, Glagolitic, Coptic, fullwidth Latin, Deseret, Osage, ...).
constexpr std::string_view kDeepseekLlmLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF})re"
    R"re(\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1})re"
    R"re(\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5})re"
    R"re(\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})re"
    R"re(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})re"
    R"re(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC})re"
    R"re(\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})re"
    R"re(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134})re"
    R"re(\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})re"
    R"re(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787})re"
    R"re(\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A})re"
    R"re(\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})re"
    R"re(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
constexpr std::string_view kDeepseekLlmPunct =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re";
constexpr std::string_view kCjkHangul = R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";
constexpr std::string_view kBloom = R"re( ?[^(\s|.,!?…。，、।۔،)]+)re";

struct Entry {
  std::vector<std::string_view> names;  // the first is canonical
  PreTokenizerConfig config;
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = [] {
    std::vector<Entry> t;
    auto add = [&t](std::vector<std::string_view> names, std::vector<std::string_view> regexes,
                    bool ignore_merges = false, bool add_bos = false) {
      t.push_back({names, {names.front(), std::move(regexes), ignore_merges, add_bos}});
    };
    add({"default"}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"});
    add({"llama3", "llama-bpe", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"}, {kLlama3}, true,
        true);
    add({"dbrx", "smaug-bpe"}, {kLlama3});
    add({"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan", "kormo"}, {kQwen2});
    add({"gpt-2", "mpt", "olmo", "jais", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es",
         "jina-v2-de", "jina-v2-code", "roberta-bpe", "exaone4", "trillion", "granite-docling", "a.x-4.0", "mellum"},
        {kGpt2});
    add({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, {R"re(\p{N})re", kGpt2});
    add({"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"});
    add({"deepseek-llm"},
        {"[\r\n]", kDeepseekLlmLetters, kDeepseekLlmPunct, R"re(\s+$)re", kCjkHangul, R"re(\p{N}+)re"});
    add({"deepseek-coder"}, {"[\r\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kCjkHangul, R"re(\p{N})re"});
    add({"deepseek-v3"},
        {R"re(\p{N}{1,3})re", R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re", kDeepseekV3Words});
    add({"tekken"}, {kTekken}, true, true);
    add({"gpt-4o", "llama4"}, {kGpt4o});
    add({"bloom", "gpt3-finnish", "poro-chat"}, {kBloom});
    add({"viking"}, {kBloom, R"re(\p{N})re"});
    return t;
  }();
  return entries;
}

struct CodeFree {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataFree {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buf{};
  pcre2_get_error_message(code, buf.data(), buf.size());
  return reinterpret_cast<const char*>(buf.data());
}

}  // namespace

const PreTokenizerConfig& pre_tokenizer_config(std::string_view pre) {
  if (pre.empty()) pre = "default";
  for (const Entry& e : table()) {
    for (std::string_view name : e.names) {
      if (name == pre) return e.config;
    }
  }
  std::vector<std::string_view> names;
  for (const Entry& e : table()) names.insert(names.end(), e.names.begin(), e.names.end());
  fail("unsupported BPE pre-tokenizer '{}' in tokenizer.ggml.pre (supported: {})", pre, fmt::join(names, ", "));
}

// One compiled pattern. Matching allocates its own match data, so one Regex serves concurrent callers.
class PreTokenizer::Regex {
 public:
  explicit Regex(std::string_view pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    // MATCH_INVALID_UTF: invalid UTF-8 in user text simply never matches, instead of failing every match.
    code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr));
    if (!code_)
      fail("cannot compile pre-tokenizer regex at offset {}: {} (pattern: {})", offset, pcre2_message(error), pattern);
    // JIT is an optimisation only; the interpreter gives the same results where it is unavailable.
    pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE);
  }

  // Calls on_match(begin, end) for each successive non-empty match in `subject`.
  template <typename OnMatch>
  void for_each_match(std::string_view subject, OnMatch&& on_match) const {
    std::unique_ptr<pcre2_match_data, MatchDataFree> data(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
    if (!data) fail("out of memory allocating regex match data");
    const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
    size_t start = 0;
    while (start < subject.size()) {
      const int rc = pcre2_match(code_.get(), s, subject.size(), start, 0, data.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) return;
      if (rc < 0) fail("pre-tokenizer regex match failed: {}", pcre2_message(rc));
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.get());
      if (ov[1] > ov[0]) {
        on_match(ov[0], ov[1]);
        start = ov[1];
      } else {
        // An empty match carries no text; step past one character so the scan advances.
        start = ov[0] + 1;
        while (start < subject.size() && (static_cast<unsigned char>(subject[start]) & 0xC0) == 0x80) ++start;
      }
    }
  }

 private:
  std::unique_ptr<pcre2_code, CodeFree> code_;
};

PreTokenizer::PreTokenizer(const PreTokenizerConfig& config) : config_(&config) {
  regexes_.reserve(config.regexes.size());
  for (std::string_view pattern : config.regexes) regexes_.emplace_back(pattern);
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  if (text.empty()) return {};
  // Words as [begin, end) offsets into text; each regex refines the previous split.
  std::vector<std::pair<size_t, size_t>> words;
  words.emplace_back(0, text.size());
  std::vector<std::pair<size_t, size_t>> next;
  for (const Regex& regex : regexes_) {
    next.clear();
    for (const auto& word : words) {
      // Plain copies: clang 14 cannot capture structured bindings in a lambda.
      const size_t begin = word.first;
      const size_t end = word.second;
      size_t done = 0;  // relative to begin
      regex.for_each_match(text.substr(begin, end - begin), [&](size_t mb, size_t me) {
        if (mb > done) next.emplace_back(begin + done, begin + mb);
        next.emplace_back(begin + mb, begin + me);
        done = me;
      });
      if (begin + done < end) next.emplace_back(begin + done, end);
    }
    words.swap(next);
  }
  std::vector<std::string_view> out;
  out.reserve(words.size());
  for (const auto& [begin, end] : words) out.push_back(text.substr(begin, end - begin));
  return out;
}

}  // namespace tessera
