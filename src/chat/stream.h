// The output of a chat stream piece by piece: the generated text so far is parsed again after every piece
// (parse_output, partial) and what grew since the last piece comes out as deltas, in the shape OpenAI streams
// them: reasoning and content text, a call's first delta with its name, then pieces of its arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/output.h"

namespace tessera::chat {

struct CallDelta {
  size_t index = 0;
  bool first = false;     // opens the call: carries the name (arguments "")
  std::string name;       // first only
  std::string arguments;  // a piece of the arguments (not first)
};

struct OutputDelta {
  std::string reasoning;
  std::string content;
  std::vector<CallDelta> calls;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

class OutputStream {
 public:
  explicit OutputStream(OutputFormat format) : format_(format) {}

  OutputDelta push(std::string_view piece);
  // The end of the text: the final parse, and what it adds.
  OutputDelta finish();
  // What has been sent (after finish(): the final parse, as far as it extends what was sent).
  const ParsedOutput& sent() const { return sent_; }
  const std::string& text() const { return text_; }

 private:
  OutputDelta advance(const ParsedOutput& now);

  OutputFormat format_;
  std::string text_;
  ParsedOutput sent_;
};

}  // namespace tessera::chat
