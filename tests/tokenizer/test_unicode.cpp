// UTF-8 helpers, the GPT-2 byte-level alphabet and the regex pre-tokenizer, tested on their own.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace tessera {
namespace {

TEST(tokenizerUtf8, SequenceLengthFromLeadByte) {
  EXPECT_EQ(utf8_sequence_length('a'), 1u);
  EXPECT_EQ(utf8_sequence_length(0xC3), 2u);
  EXPECT_EQ(utf8_sequence_length(0xE2), 3u);
  EXPECT_EQ(utf8_sequence_length(0xF0), 4u);
  EXPECT_EQ(utf8_sequence_length(0x80), 1u);  // stray continuation byte
  EXPECT_EQ(utf8_sequence_length(0xFF), 1u);
}

TEST(tokenizerUtf8, EncodeDecodeRoundTrip) {
  for (uint32_t cp : {0x41u, 0xE9u, 0x2581u, 0x1F999u, 0x10FFFFu}) {
    std::string s;
    append_utf8(s, cp);
    const DecodedCodePoint d = decode_utf8(s, 0);
    EXPECT_TRUE(d.valid) << cp;
    EXPECT_EQ(d.code_point, cp);
    EXPECT_EQ(d.length, s.size());
  }
}

TEST(tokenizerUtf8, DecodeRejectsInvalidSequences) {
  for (std::string bad : {std::string("\x80"), std::string("\xC3"), std::string("\xC3\x41"),
                          std::string("\xC0\xAF"),             // overlong '/'
                          std::string("\xED\xA0\x80"),         // surrogate
                          std::string("\xF4\x90\x80\x80")}) {  // past U+10FFFF
    const DecodedCodePoint d = decode_utf8(bad, 0);
    EXPECT_FALSE(d.valid);
    EXPECT_EQ(d.length, 1u);
  }
}

TEST(tokenizerUtf8, CompletePrefixHoldsBackOnlyUnfinishedSequences) {
  const std::string_view llama = "\xF0\x9F\xA6\x99";  // U+1F999
  auto after_a = [](std::string_view tail) {
    std::string s = "a";
    s.append(tail);
    return s;
  };
  EXPECT_EQ(utf8_complete_prefix("ab"), 2u);
  EXPECT_EQ(utf8_complete_prefix(after_a(llama.substr(0, 1))), 1u);
  EXPECT_EQ(utf8_complete_prefix(after_a(llama.substr(0, 3))), 1u);
  EXPECT_EQ(utf8_complete_prefix(after_a(llama)), 5u);
  EXPECT_EQ(utf8_complete_prefix("a\x80"), 2u);  // a stray continuation byte never completes: release it
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);  // not a lead byte at all
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
}

TEST(tokenizerUtf8, StreamBufferReleasesWholeCharacters) {
  Utf8StreamBuffer buf;
  const std::string e_acute = "\xC3\xA9";
  EXPECT_EQ(buf.push("x"), "x");
  EXPECT_EQ(buf.push(e_acute.substr(0, 1)), "");
  EXPECT_FALSE(buf.empty());
  EXPECT_EQ(buf.push(e_acute.substr(1) + "y"), e_acute + "y");
  EXPECT_TRUE(buf.empty());
  EXPECT_EQ(buf.push("\xE2\x96"), "");
  EXPECT_EQ(buf.flush(), "\xE2\x96");  // end of stream: whatever is left goes out as is
  EXPECT_TRUE(buf.empty());
}

TEST(tokenizerByteLevel, Gpt2AlphabetKnownValues) {
  EXPECT_EQ(byte_to_code_point('!'), 0x21u);
  EXPECT_EQ(byte_to_code_point(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(byte_to_code_point('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(byte_to_code_point(0), 0x100u);
  EXPECT_EQ(byte_to_code_point(0xAD), 0x143u);  // soft hyphen is the last byte moved
  EXPECT_EQ(byte_to_code_point(0xFF), 0xFFu);
}

TEST(tokenizerByteLevel, IsABijectionOverAllBytes) {
  std::set<uint32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = byte_to_code_point(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(cp).second) << b;
    EXPECT_EQ(code_point_to_byte(cp), static_cast<uint8_t>(b));
  }
  EXPECT_FALSE(code_point_to_byte(0x144).has_value());
  EXPECT_FALSE(code_point_to_byte(0xAD).has_value());  // 0xAD itself is remapped, so U+00AD is not in the alphabet
}

TEST(tokenizerByteLevel, EncodeDecodeArbitraryBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string encoded;
  append_byte_level(encoded, all);
  EXPECT_EQ(decode_byte_level(encoded), all);
  encoded.clear();
  append_byte_level(encoded, " hi\n");
  EXPECT_EQ(encoded, "\xC4\xA0hi\xC4\x8A");  // "ĠhiĊ"
  // Text outside the alphabet (a vocab entry that was never byte-level encoded) passes through.
  EXPECT_EQ(decode_byte_level("\xE2\x96\x81x"), "\xE2\x96\x81x");
}

std::vector<std::string> split(std::string_view pre, std::string_view text) {
  const PreTokenizer p(pre_tokenizer_config(pre));
  std::vector<std::string> out;
  for (std::string_view w : p.split(text)) out.emplace_back(w);
  return out;
}

using Words = std::vector<std::string>;

TEST(tokenizerPreTokenizer, Gpt2Words) {
  EXPECT_EQ(split("gpt-2", "Hello world's 12345!!  x"), (Words{"Hello", " world", "'s", " 12345", "!!", " ", " x"}));
  EXPECT_EQ(split("gpt-2", ""), Words{});
}

TEST(tokenizerPreTokenizer, Llama3GroupsDigitsByThreeAndIgnoresCase) {
  EXPECT_EQ(split("llama3", "Hello WORLD'S 12345\n\n  x"),
            (Words{"Hello", " WORLD", "'S", " ", "123", "45", "\n\n", " ", " x"}));
  // llama-bpe is the name llama.cpp's converter writes for Llama 3.
  EXPECT_EQ(pre_tokenizer_config("llama-bpe").name, "llama3");
  EXPECT_TRUE(pre_tokenizer_config("llama-bpe").ignore_merges);
}

TEST(tokenizerPreTokenizer, Qwen2SplitsSingleDigits) {
  EXPECT_EQ(split("qwen2", "abc 123"), (Words{"abc", " ", "1", "2", "3"}));
}

TEST(tokenizerPreTokenizer, SequentialRegexesKeepUnmatchedRuns) {
  // deepseek-coder isolates newlines first, then letters, punctuation, CJK and single digits.
  EXPECT_EQ(split("deepseek-coder", "ab\n12 c"), (Words{"ab", "\n", "1", "2", " c"}));
  // starcoder: every digit on its own, then the GPT-2 pattern within the rest.
  EXPECT_EQ(split("starcoder", "x 42"), (Words{"x", " ", "4", "2"}));
}

TEST(tokenizerPreTokenizer, EveryByteLandsInExactlyOneWord) {
  const std::string text = "Ünïcödé 😶‍🌫️ text\t\twith\r\nbad \xFF\xC3 bytes 3.14159";
  for (std::string_view pre : {"default", "llama3", "qwen2", "gpt-2", "deepseek-llm", "deepseek-coder", "falcon",
                               "starcoder", "refact", "mpt", "tekken", "gpt-4o", "deepseek-v3", "bloom"}) {
    std::string joined;
    for (const std::string& w : split(pre, text)) {
      EXPECT_FALSE(w.empty()) << pre;
      joined += w;
    }
    EXPECT_EQ(joined, text) << pre;
  }
}

TEST(tokenizerPreTokenizer, UnknownNameListsSupportedOnes) {
  try {
    pre_tokenizer_config("no-such-pre");
    FAIL() << "accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'no-such-pre'"), std::string::npos) << msg;
    for (std::string_view name : {"default", "llama3", "llama-bpe", "qwen2", "gpt-2", "deepseek-llm", "deepseek-coder",
                                  "falcon", "starcoder", "refact", "mpt"}) {
      EXPECT_NE(msg.find(std::string(name)), std::string::npos) << name << " missing from: " << msg;
    }
  }
  EXPECT_EQ(pre_tokenizer_config("").name, "default");  // absent key
}

}  // namespace
}  // namespace tessera
