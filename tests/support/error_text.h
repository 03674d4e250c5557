// The message of the tessera::Error that test code throws; a test failure (and "") when it throws none.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "util/error.h"

namespace tessera::test {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no tessera::Error thrown";
  return {};
}

}  // namespace tessera::test
