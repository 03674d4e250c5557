// Recursive-descent parser of the grammar text form. Positions are byte offsets, turned into line:column only
// when an error is reported.
#include "grammar/parser.h"

#include <fmt/format.h>

#include <cstdlib>

#include "util/error.h"

namespace tessera::grammar {

namespace {

// Nesting of parentheses the parser follows (it recurses once per level).
constexpr int kMaxDepth = 200;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Grammar parse() {
    skip_space();
    while (pos_ < text_.size()) {
      const size_t at = pos_;
      const std::string name = parse_name();
      skip_inline_space();
      if (text_.substr(pos_, 3) != "::=") error("expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      const uint32_t r = builder_.rule(name);
      if (builder_.defined(r)) error_at(at, "rule '" + name + "' is defined twice");
      current_ = name;
      builder_.define(r, parse_alternatives(0));
      skip_space();
      if (pos_ < text_.size() && text_[pos_] == ')') error("unbalanced ')'");
    }
    try {
      return builder_.finish("root");
    } catch (const Error& e) {
      fail("grammar: {}", e.what());
    }
  }

 private:
  [[noreturn]] void error(const std::string& message) const { error_at(pos_, message); }
  [[noreturn]] void error_at(size_t at, const std::string& message) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    fail("grammar line {}, column {}: {}", line, col, message);
  }

  void skip_inline_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) error("expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  // True when the text at pos_ starts the next rule (`name ::=`).
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  std::vector<Sequence> parse_alternatives(int depth) {
    if (depth > kMaxDepth) error("groups nested deeper than " + std::to_string(kMaxDepth));
    std::vector<Sequence> alts;
    alts.push_back(parse_sequence(depth));
    while (pos_ < text_.size() && text_[pos_] == '|') {
      ++pos_;
      alts.push_back(parse_sequence(depth));
    }
    return alts;
  }

  Sequence parse_sequence(int depth) {
    Sequence seq;
    for (;;) {
      skip_space();
      if (pos_ >= text_.size()) break;
      const char c = text_[pos_];
      if (c == '|' || c == ')') break;
      if (is_name_char(c) && at_rule_start()) break;
      const size_t item_start = pos_;
      Sequence items;
      if (c == '"') {
        ++pos_;
        items = literal(parse_literal());
      } else if (c == '[') {
        ++pos_;
        Item it;
        it.set = parse_class();
        items.push_back(it);
      } else if (c == '.') {
        ++pos_;
        Item it;
        it.set.invert();
        items.push_back(it);
      } else if (c == '(') {
        ++pos_;
        auto alts = parse_alternatives(depth + 1);
        if (pos_ >= text_.size() || text_[pos_] != ')') error_at(item_start, "unclosed '('");
        ++pos_;
        items.push_back(builder_.group(std::move(alts), current_));
      } else if (is_name_char(c)) {
        Item it;
        it.kind = Item::Rule;
        it.rule = builder_.rule(parse_name());
        items.push_back(it);
      } else {
        error(std::string("unexpected character '") + c + "'");
      }
      parse_postfix(items);
      seq.insert(seq.end(), items.begin(), items.end());
    }
    return seq;
  }

  void parse_postfix(Sequence& items) {
    if (pos_ >= text_.size()) return;
    const char c = text_[pos_];
    int min = 0, max = -1;
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      min = 1;
    } else if (c == '?') {
      ++pos_;
      max = 1;
    } else if (c == '{') {
      ++pos_;
      min = parse_int();
      max = min;
      skip_inline_space();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        skip_inline_space();
        max = (pos_ < text_.size() && text_[pos_] == '}') ? -1 : parse_int();
      }
      skip_inline_space();
      if (pos_ >= text_.size() || text_[pos_] != '}') error("expected '}' closing the repetition");
      ++pos_;
      if (max >= 0 && max < min) error("repetition maximum below its minimum");
    } else {
      return;
    }
    if (items.empty()) error("nothing to repeat");
    const Item whole = builder_.group({items}, current_);
    try {
      items = {builder_.repeat(whole, min, max, current_)};
    } catch (const Error& e) {
      error(e.what());
    }
  }

  int parse_int() {
    skip_inline_space();
    const size_t start = pos_;
    long value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      value = value * 10 + (text_[pos_] - '0');
      if (value > 1000000) error("repetition count too large");
      ++pos_;
    }
    if (pos_ == start) error("expected a number");
    return static_cast<int>(value);
  }

  // One escaped or plain character inside a literal or class; code points above 0x7F come back as UTF-8.
  std::string parse_char(char close) {
    if (pos_ >= text_.size()) error(std::string("unterminated ") + (close == '"' ? "string" : "class"));
    const char c = text_[pos_++];
    if (c == '\n' && close == '"') error_at(pos_ - 1, "newline inside a string (write \\n)");
    if (c != '\\') return std::string(1, c);
    if (pos_ >= text_.size()) error("unterminated escape");
    const char e = text_[pos_++];
    switch (e) {
      case 'n':
        return "\n";
      case 'r':
        return "\r";
      case 't':
        return "\t";
      case '0':
        return std::string(1, '\0');
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
        return std::string(1, e);
      case 'x':
      case 'u':
      case 'U': {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
          const int h = pos_ < text_.size() ? hex_value(text_[pos_]) : -1;
          if (h < 0) error(std::string("expected ") + std::to_string(digits) + " hex digits after \\" + e);
          v = v * 16 + static_cast<uint32_t>(h);
          ++pos_;
        }
        if (e == 'x') return std::string(1, static_cast<char>(v));
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) error("escape is not a Unicode scalar value");
        std::string out;
        append_utf8(out, v);
        return out;
      }
      default:
        error_at(pos_ - 1, std::string("unknown escape '\\") + e + "'");
    }
  }

  std::string parse_literal() {
    const size_t start = pos_ - 1;
    std::string out;
    for (;;) {
      if (pos_ >= text_.size()) error_at(start, "unterminated string");
      if (text_[pos_] == '"') {
        ++pos_;
        return out;
      }
      out += parse_char('"');
    }
  }

  // One byte of a class; a multi-byte character has no place in a byte class.
  uint8_t class_byte() {
    const size_t at = pos_;
    const std::string c = parse_char(']');
    if (c.size() != 1 || static_cast<unsigned char>(text_[at]) >= 0x80)
      error_at(at, "a class holds single bytes: write a non-ASCII character as an alternative");
    return static_cast<uint8_t>(c[0]);
  }

  ByteSet parse_class() {
    const size_t start = pos_ - 1;
    ByteSet set;
    bool negate = false;
    if (pos_ < text_.size() && text_[pos_] == '^') {
      negate = true;
      ++pos_;
    }
    for (;;) {
      if (pos_ >= text_.size()) error_at(start, "unterminated class");
      if (text_[pos_] == ']') {
        ++pos_;
        break;
      }
      const uint8_t lo = class_byte();
      if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        const uint8_t hi = class_byte();
        if (hi < lo) error("class range is reversed");
        set.add_range(lo, hi);
      } else {
        set.add(lo);
      }
    }
    if (negate) set.invert();
    if (set.empty()) error_at(start, "class matches no byte");
    return set;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string current_ = "root";
  Builder builder_;
};

}  // namespace

Grammar parse_grammar(std::string_view text) { return Parser(text).parse(); }

std::string quote_literal(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u >= 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace tessera::grammar
