// error_of(f): the message of the meshtp::Error that f() throws, or "" when it throws none —
// for tests that check an error names the value ("plan 'p.json': dp=0 must be at least 1").
#pragma once

#include <string>
#include <utility>

#include "core/error.hpp"

namespace meshtp::test_support {

template <typename F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace meshtp::test_support
