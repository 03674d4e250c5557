// Diagnostics to standard error (standard output is reserved for the program's real output).
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <utility>

namespace tessera {

template <typename... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, format, std::forward<Args>(args)...);
  std::fputc('\n', stderr);
}

template <typename... Args>
void log_warn(fmt::format_string<Args...> format, Args&&... args) {
  std::fputs("warning: ", stderr);
  fmt::print(stderr, format, std::forward<Args>(args)...);
  std::fputc('\n', stderr);
}

}  // namespace tessera
