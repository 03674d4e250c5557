// OutputStream: diffs of successive parses. A parse that does not extend what was sent (malformed output the
// partial parse took for a call) changes nothing already sent; later growth is still reported.
#include "chat/stream.h"

namespace tessera::chat {

namespace {

// The part of `now` after `sent`, and `sent` moved up to `now`, when `now` extends it.
std::string grow(std::string& sent, const std::string& now) {
  if (now.size() <= sent.size() || now.compare(0, sent.size(), sent) != 0) return {};
  std::string piece = now.substr(sent.size());
  sent = now;
  return piece;
}

}  // namespace

OutputDelta OutputStream::push(std::string_view piece) {
  text_ += piece;
  return advance(parse_output(text_, format_, false));
}

OutputDelta OutputStream::finish() { return advance(parse_output(text_, format_, true)); }

OutputDelta OutputStream::advance(const ParsedOutput& now) {
  OutputDelta d;
  d.reasoning = grow(sent_.reasoning, now.reasoning);
  d.content = grow(sent_.content, now.content);
  for (size_t k = 0; k < now.calls.size(); ++k) {
    if (k == sent_.calls.size()) {
      sent_.calls.push_back({now.calls[k].name, {}});
      d.calls.push_back({k, true, now.calls[k].name, {}});
    }
    if (sent_.calls[k].name != now.calls[k].name) continue;
    std::string args = grow(sent_.calls[k].arguments, now.calls[k].arguments);
    if (!args.empty()) d.calls.push_back({k, false, {}, std::move(args)});
  }
  return d;
}

}  // namespace tessera::chat
