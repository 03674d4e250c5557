// Grammar rules for free text inside markup: a value the markup ends with a closing tag rather than a quote, so
// the text may hold anything but that tag. The rules are a small automaton over the tag (right-linear, so the
// matcher follows them byte by byte, across token boundaries, without deepening its stacks).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::grammar {

// Rules defining `name` ::= T lead stop, where T is any UTF-8 text (tabs and line breaks allowed, no other control
// bytes) such that T + lead + stop holds `stop` only at its end, and none of `avoid` (tags that would end the text
// for a reader too): a reader that ends the text at the first `stop` finds exactly T + lead. Throws Error when no
// text can do it (lead holds stop) or a tag is empty.
std::string text_until_rules(const std::string& name, std::string_view lead, std::string_view stop,
                             const std::vector<std::string>& avoid = {});

// The rule `name` ::= one UTF-8 character (as text_until_rules allows) that does not start with byte `excluded`:
// for length-bounded text, which then cannot hold a tag starting with that byte.
std::string text_char_rule(const std::string& name, uint8_t excluded);

}  // namespace tessera::grammar
