// SPM and BPE behaviour on small hand-built vocabularies: merge order, byte fallback, special tokens,
// BOS/EOS flags, end-of-generation detection, decoding, streaming, and clear errors for bad metadata.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf_value.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tessera {
namespace {

using Ids = std::vector<TokenId>;

struct Tok {
  std::string text;
  float score = 0.0f;
  int32_t type = 1;  // tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
};

gguf::Value strings(const std::vector<std::string>& items) {
  std::vector<gguf::Value> v;
  for (const std::string& s : items) v.emplace_back(s);
  return gguf::Value::array(gguf::ValueType::STRING, std::move(v));
}

gguf::Metadata make_metadata(const std::string& model, const std::vector<Tok>& toks) {
  std::vector<gguf::Value> texts;
  std::vector<gguf::Value> scores;
  std::vector<gguf::Value> types;
  for (const Tok& t : toks) {
    texts.emplace_back(t.text);
    scores.emplace_back(t.score);
    types.emplace_back(t.type);
  }
  gguf::Metadata md;
  md.set("tokenizer.ggml.model", gguf::Value(model));
  md.set("tokenizer.ggml.tokens", gguf::Value::array(gguf::ValueType::STRING, std::move(texts)));
  md.set("tokenizer.ggml.scores", gguf::Value::array(gguf::ValueType::FLOAT32, std::move(scores)));
  md.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::INT32, std::move(types)));
  return md;
}

// ids 0..2 <unk> <s> </s>; 3..258 <0x00>..<0xFF>; then the pieces below.
constexpr TokenId kByte0 = 3;
constexpr TokenId kSpace = 259, kA = 260, kB = 261, kC = 262, kAB = 263, kBC = 264, kSpaceA = 265;
constexpr TokenId kImStart = 266, kImEnd = 267, kXY = 268, kXYZ = 269, kSpaceHi = 273;

std::vector<Tok> spm_tokens() {
  std::vector<Tok> t = {{"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}};
  for (int b = 0; b < 256; ++b) t.push_back({fmt::format("<0x{:02X}>", b), 0, 6});
  t.insert(t.end(), {{"\xE2\x96\x81", -1},  // ▁
                     {"a", -2},
                     {"b", -2},
                     {"c", -2},
                     {"ab", -5},
                     {"bc", -1},
                     {"\xE2\x96\x81"
                      "a",
                      -3},
                     {"<|im_start|>", 0, 3},
                     {"<|im_end|>", 0, 4},  // typed user-defined on purpose: it must still end generation
                     {"xy", 0, 4},
                     {"xyz", 0, 4},
                     {"h", -2},
                     {"i", -2},
                     {"hi", -1.5f},
                     {"\xE2\x96\x81"
                      "hi",
                      -1}});
  return t;
}

std::unique_ptr<Tokenizer> spm(const std::function<void(gguf::Metadata&)>& edit = {}) {
  gguf::Metadata md = make_metadata("llama", spm_tokens());
  if (edit) edit(md);
  return Tokenizer::from_metadata(md);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "'" << (haystack) << "' lacks '" << (needle) << "'"

TEST(tokenizerSpm, MergesHighestScoreFirst) {
  const auto tok = spm();
  // "▁abc": bc (-1) beats ▁a (-3) and ab (-5); then ▁a merges.
  EXPECT_EQ(tok->encode("abc", false, false), (Ids{kSpaceA, kBC}));
  EXPECT_EQ(tok->decode(tok->encode("abc", false, false)), "abc");
}

TEST(tokenizerSpm, EqualScoresMergeLeftmostFirst) {
  const auto tok = spm([](gguf::Metadata& md) {
    auto t = spm_tokens();
    t[kAB].score = -1;  // same as bc
    md = make_metadata("llama", t);
    md.set("tokenizer.ggml.add_space_prefix", gguf::Value(false));
  });
  EXPECT_EQ(tok->encode("abc", false, false), (Ids{kAB, kC}));
  EXPECT_EQ(tok->decode(Ids{kAB, kC}), "abc");  // no prefix added, none stripped
}

TEST(tokenizerSpm, SpacesBecomeTheSentencePieceMark) {
  const auto tok = spm();
  EXPECT_EQ(tok->encode(" a", false, false), (Ids{kSpace, kSpaceA}));
  EXPECT_EQ(tok->decode(Ids{kSpace, kSpaceA}), " a");
  EXPECT_EQ(tok->token_to_piece(kSpaceA), " a");
  EXPECT_EQ(tok->encode("", false, false), Ids{});
  EXPECT_EQ(tok->encode("", true, false), Ids{1});
}

TEST(tokenizerSpm, ByteFallbackForMissingCharacters) {
  const auto tok = spm();
  const Ids ids = tok->encode("a\xC3\xA9", false, false);  // "aé"
  EXPECT_EQ(ids, (Ids{kSpaceA, kByte0 + 0xC3, kByte0 + 0xA9}));
  EXPECT_EQ(tok->token_to_piece(kByte0 + 0xC3), "\xC3");
  EXPECT_EQ(tok->decode(ids), "a\xC3\xA9");
  // Invalid UTF-8 survives the round trip too.
  EXPECT_EQ(tok->decode(tok->encode("\xFF"
                                    "b\x80",
                                    false, false)),
            "\xFF"
            "b\x80");
}

TEST(tokenizerSpm, UnknownTokenWhenTheVocabHasNoBytes) {
  std::vector<Tok> t = {{"<unk>", 0, 2}, {"<s>", 0, 3}, {"</s>", 0, 3}, {"\xE2\x96\x81", -1}, {"a", -1}};
  const auto tok = Tokenizer::from_metadata(make_metadata("llama", t));
  EXPECT_EQ(tok->encode("a\xC3\xA9", false, false), (Ids{3, 4, 0}));  // one <unk> for the whole character
  EXPECT_EQ(tok->token_to_piece(0), "");
  EXPECT_EQ(tok->token_to_piece(0, true), "<unk>");
}

TEST(tokenizerSpm, AddBosByDefaultAndAsTheKeysSay) {
  EXPECT_EQ(spm()->encode("a", true, false), (Ids{1, kSpaceA}));
  EXPECT_TRUE(spm()->add_bos());
  const auto no_bos = spm([](gguf::Metadata& md) { md.set("tokenizer.ggml.add_bos_token", gguf::Value(false)); });
  EXPECT_EQ(no_bos->encode("a", true, false), (Ids{kSpaceA}));
  const auto with_eos = spm([](gguf::Metadata& md) { md.set("tokenizer.ggml.add_eos_token", gguf::Value(true)); });
  EXPECT_EQ(with_eos->encode("a", true, false), (Ids{1, kSpaceA, 2}));
  EXPECT_EQ(with_eos->encode("a", false, false), (Ids{kSpaceA}));
}

TEST(tokenizerSpm, ParseSpecialMatchesControlTokens) {
  const auto tok = spm();
  // Text after a special token gets its own space prefix, as SentencePiece sees a new sentence.
  EXPECT_EQ(tok->encode("<|im_start|>hi", false, true), (Ids{kImStart, kSpaceHi}));
  const Ids plain = tok->encode("<|im_start|>hi", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kImStart), 0);
  EXPECT_EQ(tok->decode(plain), "<|im_start|>hi");
  // BOS written in the text is a control token too.
  EXPECT_EQ(tok->encode("<s>a", false, true), (Ids{1, kSpaceA}));
}

TEST(tokenizerSpm, UserDefinedTokensAlwaysMatchLongestFirst) {
  const auto tok = spm();
  const Ids ids = tok->encode("axyzxy", false, false);
  EXPECT_EQ(ids, (Ids{kSpaceA, kXYZ, kXY}));
  EXPECT_EQ(tok->token_to_piece(kXYZ), "xyz");  // user-defined pieces print as they are
  EXPECT_EQ(tok->decode(ids), "axyzxy");
}

TEST(tokenizerSpm, EndOfGenerationTokens) {
  const auto tok = spm();
  EXPECT_TRUE(tok->is_eog(2));  // EOS
  EXPECT_TRUE(tok->is_eog(kImEnd));
  EXPECT_EQ(tok->eot(), kImEnd);
  EXPECT_FALSE(tok->is_eog(kImStart));
  EXPECT_FALSE(tok->is_eog(1));
  // A terminator is treated as control: not printed unless asked, and only parsed with parse_special.
  EXPECT_TRUE(tok->is_control(kImEnd));
  EXPECT_EQ(tok->token_to_piece(kImEnd), "");
  EXPECT_EQ(tok->token_to_piece(kImEnd, true), "<|im_end|>");
  EXPECT_EQ(tok->encode("<|im_end|>", false, true), (Ids{kImEnd}));
  EXPECT_FALSE(tok->is_control(-1));
  EXPECT_FALSE(tok->is_control(100000));
}

TEST(tokenizerSpm, EotFromMetadataKey) {
  const auto tok = spm([](gguf::Metadata& md) { md.set("tokenizer.ggml.eot_token_id", gguf::Value(uint32_t{kXY})); });
  EXPECT_EQ(tok->eot(), kXY);
  EXPECT_TRUE(tok->is_eog(kXY));
  EXPECT_TRUE(tok->is_eog(kImEnd));  // still recognised by its text
}

TEST(tokenizerSpm, DecodeFollowsLlamaCppLeadingSpaceRule) {
  const auto tok = spm();
  EXPECT_EQ(tok->decode(Ids{kSpaceA, kBC}), "abc");
  EXPECT_EQ(tok->decode(Ids{1, kSpaceA, kBC}), " abc");  // BOS uses up the one strip, as in llama.cpp
  EXPECT_EQ(tok->decode(Ids{1, kSpaceA, kBC}, true), "<s> abc");
  EXPECT_EQ(tok->decode(Ids{}), "");
  EXPECT_EQ(tok->token_text(kSpaceA),
            "\xE2\x96\x81"
            "a");
  EXPECT_EQ(tok->find_token("xyz"), kXYZ);
  EXPECT_FALSE(tok->find_token("zzz").has_value());
  EXPECT_THROW(tok->token_to_piece(5000), Error);
  EXPECT_THROW(tok->token_to_piece(-1), Error);
}

TEST(tokenizerSpm, StreamDecoderWaitsForWholeCharacters) {
  const auto tok = spm();
  const Ids ids = tok->encode("a\xC3\xA9\xF0\x9F\xA6\x99", false, false);  // "aé🦙", the last two as bytes
  ASSERT_EQ(ids.size(), 7u);
  StreamDecoder stream(*tok);
  std::vector<std::string> out;
  for (TokenId id : ids) out.push_back(stream.push(id));
  EXPECT_EQ(out, (std::vector<std::string>{" a", "", "\xC3\xA9", "", "", "", "\xF0\x9F\xA6\x99"}));
  EXPECT_EQ(stream.flush(), "");
  EXPECT_EQ(stream.push(kByte0 + 0xE2), "");
  EXPECT_EQ(stream.flush(), "\xE2");  // generation ended mid-character
}

TEST(tokenizerSpm, MissingOrNoneSpecialIds) {
  const auto tok = spm([](gguf::Metadata& md) {
    md.set("tokenizer.ggml.seperator_token_id", gguf::Value(uint32_t{0xFFFFFFFF}));
    md.set("tokenizer.ggml.padding_token_id", gguf::Value(uint32_t{0xFFFFFFFF}));
    md.set("tokenizer.ggml.eos_token_id", gguf::Value(int32_t{-1}));
  });
  EXPECT_EQ(tok->vocab().sep(), kNoToken);
  EXPECT_EQ(tok->vocab().pad(), kNoToken);
  EXPECT_EQ(tok->eos(), kNoToken);
  EXPECT_EQ(tok->bos(), 1);  // llama.cpp's SPM default when the key is absent
  const auto no_bos = spm([](gguf::Metadata& md) {
    md.set("tokenizer.ggml.bos_token_id", gguf::Value(uint32_t{0xFFFFFFFF}));
    md.set("tokenizer.ggml.add_bos_token", gguf::Value(false));
  });
  EXPECT_EQ(no_bos->bos(), kNoToken);
  EXPECT_EQ(no_bos->encode("a", true, false), (Ids{kSpaceA}));
}

TEST(tokenizerBadMetadata, ClearErrors) {
  auto with = [](const std::function<void(gguf::Metadata&)>& edit) {
    return error_of([&] {
      gguf::Metadata md = make_metadata("llama", spm_tokens());
      edit(md);
      Tokenizer::from_metadata(md);
    });
  };
  auto rebuilt = [](const std::string& model, const std::vector<Tok>& t) {
    return error_of([&] { Tokenizer::from_metadata(make_metadata(model, t)); });
  };

  EXPECT_CONTAINS(error_of([] { Tokenizer::from_metadata(gguf::Metadata{}); }), "tokenizer.ggml.model");
  EXPECT_EQ(with([](gguf::Metadata& md) { md.set("tokenizer.ggml.model", gguf::Value("t5")); }),
            "unsupported tokenizer model 't5' (supported: llama, gpt2)");

  const std::string no_tokens = error_of([] {
    gguf::Metadata md;
    md.set("tokenizer.ggml.model", gguf::Value("llama"));
    Tokenizer::from_metadata(md);
  });
  EXPECT_CONTAINS(no_tokens, "tokenizer.ggml.tokens");
  EXPECT_CONTAINS(no_tokens, "missing");

  const std::string short_scores = with([](gguf::Metadata& md) {
    md.set("tokenizer.ggml.scores", gguf::Value::array(gguf::ValueType::FLOAT32, {gguf::Value(0.0f)}));
  });
  EXPECT_CONTAINS(short_scores, "tokenizer.ggml.scores");
  EXPECT_CONTAINS(short_scores, "1 entries");
  EXPECT_CONTAINS(short_scores, "274");

  EXPECT_CONTAINS(with([](gguf::Metadata& md) {
                    md.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::INT32, {gguf::Value(1)}));
                  }),
                  "tokenizer.ggml.token_type");

  const std::string bad_bos =
      with([](gguf::Metadata& md) { md.set("tokenizer.ggml.bos_token_id", gguf::Value(uint32_t{99999})); });
  EXPECT_CONTAINS(bad_bos, "tokenizer.ggml.bos_token_id");
  EXPECT_CONTAINS(bad_bos, "99999");
  EXPECT_CONTAINS(with([](gguf::Metadata& md) { md.set("tokenizer.ggml.eos_token_id", gguf::Value(int32_t{-7})); }),
                  "tokenizer.ggml.eos_token_id");
  EXPECT_CONTAINS(with([](gguf::Metadata& md) { md.set("tokenizer.ggml.unknown_token_id", gguf::Value("zero")); }),
                  "tokenizer.ggml.unknown_token_id");
  EXPECT_CONTAINS(with([](gguf::Metadata& md) { md.set("tokenizer.ggml.add_bos_token", gguf::Value(uint32_t{1})); }),
                  "tokenizer.ggml.add_bos_token");
  EXPECT_CONTAINS(
      with([](gguf::Metadata& md) { md.set("tokenizer.ggml.bos_token_id", gguf::Value(uint32_t{0xFFFFFFFF})); }),
      "BOS");
  const std::string numeric_tokens = error_of([] {
    gguf::Metadata md;
    md.set("tokenizer.ggml.model", gguf::Value("llama"));
    md.set("tokenizer.ggml.tokens", gguf::Value::array(gguf::ValueType::UINT32, {gguf::Value(1u)}));
    Tokenizer::from_metadata(md);
  });
  EXPECT_CONTAINS(numeric_tokens, "tokenizer.ggml.tokens[0]");
  EXPECT_CONTAINS(numeric_tokens, "string");
  EXPECT_CONTAINS(with([](gguf::Metadata& md) { md.set("tokenizer.ggml.tokens", strings({})); }), "empty");

  auto bad_type = spm_tokens();
  bad_type[kA].type = 9;
  EXPECT_CONTAINS(rebuilt("llama", bad_type), "tokenizer.ggml.token_type[260] = 9");
  auto bad_byte = spm_tokens();
  bad_byte[kByte0].text = "<0xZZ>";
  EXPECT_CONTAINS(rebuilt("llama", bad_byte), "<0xZZ>");
}

// A byte-level BPE vocab: the 256 byte-level characters (id = byte), then merged pieces.
constexpr TokenId kBpeAB = 256, kBpeBC = 257, kBpeABC = 258, kBpeEot = 259, kBpeSpaceA = 260;

gguf::Metadata bpe_metadata(const std::string& pre, const std::vector<std::string>& merges) {
  std::vector<Tok> t;
  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_byte_level(s, std::string(1, static_cast<char>(b)));
    t.push_back({s});
  }
  t.insert(t.end(), {{"ab"},
                     {"bc"},
                     {"abc"},
                     {"<|endoftext|>", 0, 3},
                     {"\xC4\xA0"
                      "a"}});  // Ġa
  gguf::Metadata md = make_metadata("gpt2", t);
  md.set("tokenizer.ggml.merges", strings(merges));
  if (!pre.empty()) md.set("tokenizer.ggml.pre", gguf::Value(pre));
  md.set("tokenizer.ggml.bos_token_id", gguf::Value(uint32_t{kBpeEot}));
  md.set("tokenizer.ggml.eos_token_id", gguf::Value(uint32_t{kBpeEot}));
  return md;
}

TEST(tokenizerBpe, MergesByRank) {
  const auto first_ab = Tokenizer::from_metadata(bpe_metadata("gpt-2", {"a b", "b c"}));
  EXPECT_EQ(first_ab->encode("abc", false, false), (Ids{kBpeAB, 'c'}));
  const auto first_bc = Tokenizer::from_metadata(bpe_metadata("gpt-2", {"b c", "a b"}));
  EXPECT_EQ(first_bc->encode("abc", false, false), (Ids{'a', kBpeBC}));
  // Space is the byte-level 'Ġ' (id 32 here) and merges do not cross pre-tokenizer words.
  const auto with_space = Tokenizer::from_metadata(bpe_metadata("gpt-2", {"Ġ a", "a b"}));
  EXPECT_EQ(with_space->encode("ab ab", false, false), (Ids{kBpeAB, kBpeSpaceA, 'b'}));
  EXPECT_EQ(with_space->decode(with_space->encode("ab ab", false, false)), "ab ab");
}

TEST(tokenizerBpe, IgnoreMergesEmitsWholeWordTokens) {
  // "abc" is a token no merge leads to: llama3 (ignore_merges) uses it, GPT-2 does not.
  EXPECT_EQ(Tokenizer::from_metadata(bpe_metadata("llama3", {"a b"}))->encode("abc", false, false), (Ids{kBpeABC}));
  EXPECT_EQ(Tokenizer::from_metadata(bpe_metadata("gpt-2", {"a b"}))->encode("abc", false, false), (Ids{kBpeAB, 'c'}));
}

TEST(tokenizerBpe, AddBosDefaultsPerPreTokenizer) {
  const auto gpt2 = Tokenizer::from_metadata(bpe_metadata("gpt-2", {"a b"}));
  EXPECT_FALSE(gpt2->add_bos());
  EXPECT_EQ(gpt2->encode("ab", true, false), (Ids{kBpeAB}));
  const auto llama3 = Tokenizer::from_metadata(bpe_metadata("llama-bpe", {"a b"}));
  EXPECT_TRUE(llama3->add_bos());
  EXPECT_EQ(llama3->encode("ab", true, false), (Ids{kBpeEot, kBpeAB}));
  // An absent pre key means "default".
  EXPECT_EQ(Tokenizer::from_metadata(bpe_metadata("", {"a b"}))->encode("ab", false, false), (Ids{kBpeAB}));
}

TEST(tokenizerBpe, SpecialTokensAndBytes) {
  const auto tok = Tokenizer::from_metadata(bpe_metadata("gpt-2", {"a b"}));
  EXPECT_EQ(tok->encode("ab<|endoftext|>", false, true), (Ids{kBpeAB, kBpeEot}));
  const Ids plain = tok->encode("ab<|endoftext|>", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kBpeEot), 0);
  EXPECT_TRUE(tok->is_eog(kBpeEot));
  EXPECT_EQ(tok->eot(), kBpeEot);
  EXPECT_EQ(tok->token_to_piece(' '), " ");
  EXPECT_EQ(tok->token_to_piece(kBpeEot), "");
  EXPECT_EQ(tok->token_to_piece(kBpeEot, true), "<|endoftext|>");
  const std::string raw =
      "\xFF\xFE"
      "ab \xC3\xA9\n\t";
  const Ids ids = tok->encode(raw, false, false);
  EXPECT_EQ(tok->decode(ids), raw);
  StreamDecoder stream(*tok);
  std::string streamed;
  for (TokenId id : tok->encode("\xC3\xA9", false, false)) {
    streamed += '[';
    streamed += stream.push(id);
    streamed += ']';
  }
  EXPECT_EQ(streamed, "[][\xC3\xA9]");
}

TEST(tokenizerBpe, BadMetadata) {
  gguf::Metadata no_merges = bpe_metadata("gpt-2", {});
  no_merges.set("tokenizer.ggml.model", gguf::Value("gpt2"));
  gguf::Metadata md;
  for (const auto& [key, value] : no_merges.entries()) {
    if (key != "tokenizer.ggml.merges") md.set(key, value);
  }
  EXPECT_CONTAINS(error_of([&] { Tokenizer::from_metadata(md); }), "tokenizer.ggml.merges");
  EXPECT_CONTAINS(error_of([] { Tokenizer::from_metadata(bpe_metadata("gpt-2", {"ab"})); }),
                  "tokenizer.ggml.merges[0]");
  const std::string bad_pre = error_of([] { Tokenizer::from_metadata(bpe_metadata("my-pre", {"a b"})); });
  EXPECT_CONTAINS(bad_pre, "'my-pre'");
  EXPECT_CONTAINS(bad_pre, "llama3");
}

}  // namespace
}  // namespace tessera
