// Jinja lexer: template text, {{ }}, {% %} and {# #} tags, and the expression tokens inside tags.
#include "jinja/lexer.h"

#include <cctype>

#include "jinja/error.h"
#include "jinja/value.h"

namespace tessera::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's "unicode-escape" decoding of a string literal body, as Jinja2 applies it.
std::string unescape(std::string_view body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out += body[i];
      continue;
    }
    const char c = body[++i];
    auto hex = [&](size_t n) {
      char32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        if (i + k >= body.size() || !std::isxdigit(static_cast<unsigned char>(body[i + k])))
          throw JinjaError(ErrorKind::Syntax, "truncated \\x/\\u escape in a string literal", line);
        const char h = body[i + k];
        v = v * 16 +
            static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
      }
      i += n;
      append_utf8(out, v);
    };
    switch (c) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\n':
        break;
      case 'x':
        hex(2);
        break;
      case 'u':
        hex(4);
        break;
      case 'U':
        hex(8);
        break;
      default:
        if (c >= '0' && c <= '7') {
          int v = c - '0';
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            v = v * 8 + (body[++i] - '0');
          append_utf8(out, static_cast<char32_t>(v));
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string source, const LexOptions& o) : src_(std::move(source)), opt_(o) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t start = find_tag(pos_);
      std::string text = src_.substr(pos_, start - pos_);
      if (start == src_.size()) {
        emit_data(std::move(text), pos_);
        pos_ = start;
        break;
      }
      const char kind = src_[start + 1];  // '{', '%' or '#'
      const char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      } else if (sign != '+' && opt_.lstrip_blocks && kind != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos > 0 || line_starting) {
          bool all_ws = l_pos < text.size();
          for (size_t k = l_pos; k < text.size(); ++k) all_ws = all_ws && is_space(text[k]);
          if (all_ws) text.resize(l_pos);
        }
      }
      emit_data(std::move(text), pos_);
      pos_ = start + 2 + ((sign == '-' || sign == '+') ? 1 : 0);
      if (kind == '#') {
        skip_comment(start);
      } else if (kind == '%' && raw_block(start)) {
        // handled
      } else {
        tag(kind == '{', start);
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({TokenType::End, "", line_at(src_.size()), 1});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  int line_at(size_t p) {
    while (line_pos_ < p && line_pos_ < src_.size()) {
      if (src_[line_pos_] == '\n') {
        ++line_;
        line_start_ = line_pos_ + 1;
      }
      ++line_pos_;
    }
    return line_;
  }
  int column_at(size_t p) {
    line_at(p);
    return static_cast<int>(p - line_start_) + 1;
  }

  void emit_data(std::string text, size_t at) {
    if (!text.empty()) tokens_.push_back({TokenType::Data, std::move(text), line_at(at), column_at(at)});
  }

  // After a block or comment end: `-` strips all following whitespace, else trim_blocks drops one newline.
  void after_block_end(bool minus, bool plus) {
    if (minus) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (!plus && opt_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
  }

  void skip_comment(size_t start) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos)
      throw JinjaError(ErrorKind::Syntax, "missing end of comment tag", line_at(start), column_at(start));
    const bool minus = end > pos_ && src_[end - 1] == '-';
    const bool plus = end > pos_ && src_[end - 1] == '+';
    pos_ = end + 2;
    after_block_end(minus, plus);
  }

  // {% raw %}...{% endraw %}: the body is text.
  bool raw_block(size_t start) {
    size_t p = pos_;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    bool minus = false;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) minus = src_[p++] == '-';
    if (src_.compare(p, 2, "%}") != 0) return false;
    pos_ = p + 2;
    after_block_end(minus, false);
    size_t search = pos_;
    while (true) {
      const size_t open = src_.find("{%", search);
      if (open == std::string::npos)
        throw JinjaError(ErrorKind::Syntax, "missing endraw", line_at(start), column_at(start));
      size_t q = open + 2;
      const bool strip_before = q < src_.size() && src_[q] == '-';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      bool end_minus = false;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_minus = src_[q++] == '-';
      if (src_.compare(q, 2, "%}") != 0) {
        search = open + 2;
        continue;
      }
      std::string body = src_.substr(pos_, open - pos_);
      if (strip_before)
        while (!body.empty() && is_space(body.back())) body.pop_back();
      emit_data(std::move(body), pos_);
      pos_ = q + 2;
      after_block_end(end_minus, false);
      return true;
    }
  }

  void tag(bool variable, size_t start) {
    tokens_.push_back({variable ? TokenType::VarBegin : TokenType::BlockBegin, "", line_at(start), column_at(start)});
    int depth = 0;  // open brackets: a `}` inside a dict literal is not the end of the tag
    const char close = variable ? '}' : '%';
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      if (pos_ >= src_.size())
        throw JinjaError(ErrorKind::Syntax,
                         std::string("unexpected end of template, expected '") + (variable ? "}}" : "%}") + "'",
                         line_at(start), column_at(start));
      const size_t at = pos_;
      const char c = src_[pos_];
      if (depth == 0) {
        const bool minus = c == '-' || c == '+';
        const size_t q = pos_ + (minus ? 1 : 0);
        if (q + 1 < src_.size() && src_[q] == close && src_[q + 1] == '}') {
          pos_ = q + 2;
          tokens_.push_back({variable ? TokenType::VarEnd : TokenType::BlockEnd, "", line_at(at), column_at(at)});
          if (variable) {
            if (c == '-')
              while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
          } else {
            after_block_end(c == '-', c == '+');
          }
          return;
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos_;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        push(TokenType::Name, src_.substr(pos_, e - pos_), at);
        pos_ = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number(at);
      } else if (c == '\'' || c == '"') {
        size_t e = pos_ + 1;
        while (e < src_.size() && src_[e] != c) e += src_[e] == '\\' ? 2 : 1;
        if (e >= src_.size()) throw JinjaError(ErrorKind::Syntax, "unterminated string", line_at(at), column_at(at));
        push(TokenType::String, unescape(std::string_view(src_).substr(pos_ + 1, e - pos_ - 1), line_at(at)), at);
        pos_ = e + 1;
      } else {
        static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                           ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|", ";"};
        bool found = false;
        for (const char* op : kOps) {
          const size_t n = std::char_traits<char>::length(op);
          if (src_.compare(pos_, n, op) == 0) {
            if (op[0] == '(' || op[0] == '[' || op[0] == '{') ++depth;
            if ((op[0] == ')' || op[0] == ']' || op[0] == '}') && depth > 0) --depth;
            push(TokenType::Operator, op, at);
            pos_ += n;
            found = true;
            break;
          }
        }
        if (!found)
          throw JinjaError(ErrorKind::Syntax, std::string("unexpected character '") + c + "'", line_at(at),
                           column_at(at));
      }
    }
  }

  void number(size_t at) {
    size_t e = pos_;
    auto digits = [&] {
      while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      ++e;
      digits();
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t f = e + 1;
      if (f < src_.size() && (src_[f] == '+' || src_[f] == '-')) ++f;
      if (f < src_.size() && std::isdigit(static_cast<unsigned char>(src_[f]))) {
        e = f;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = pos_; k < e; ++k)
      if (src_[k] != '_') text += src_[k];
    push(is_float ? TokenType::Float : TokenType::Integer, text, at);
    pos_ = e;
  }

  void push(TokenType t, std::string text, size_t at) {
    tokens_.push_back({t, std::move(text), line_at(at), column_at(at)});
  }

  std::string src_;
  LexOptions opt_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
  int line_ = 1;
  size_t line_pos_ = 0;
  size_t line_start_ = 0;
};

// Jinja2 normalises newlines to \n and drops one trailing newline before lexing.
std::string normalise(std::string_view source, bool keep_trailing_newline) {
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s += source[i];
    }
  }
  if (!keep_trailing_newline && !s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& options) {
  return Lexer(normalise(source, options.keep_trailing_newline), options).run();
}

}  // namespace tessera::jinja
