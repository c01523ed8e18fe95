// FUZZ_CHECK: the assertion of a fuzz target.
//
// A fuzz target states what must hold for every input; a broken property must
// crash, so that libFuzzer (or the replay driver) reports the input that broke
// it. Unlike a gtest expectation it stops at once, with the file, line,
// condition and a message built from the remaining arguments (absl::StrCat).
//
//   FUZZ_CHECK(sink.end_count() <= 1, "request ", id, " ended twice");
#ifndef OMNISTAGE_FUZZ_FUZZ_CHECK_H_
#define OMNISTAGE_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace fuzz {

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* condition,
                                     const std::string& message) {
  std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n  (%s)\n", file, line, message.c_str(),
               condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace fuzz
}  // namespace omnistage

#define FUZZ_CHECK(condition, ...)                                                       \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      ::omnistage::fuzz::CheckFailed(__FILE__, __LINE__, #condition,                     \
                                     ::absl::StrCat(__VA_ARGS__));                       \
    }                                                                                    \
  } while (false)

#endif  // OMNISTAGE_FUZZ_FUZZ_CHECK_H_
