// Whether text is UTF-8 as protobuf's string fields and JSON require (RFC
// 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
//
//   if (std::optional<size_t> bad = FirstInvalidUtf8(prompt)) ... byte *bad
//
// Thread-safe (no state).
#ifndef OMNISTAGE_COMMON_UTF8_H_
#define OMNISTAGE_COMMON_UTF8_H_

#include <cstddef>
#include <optional>

#include "absl/strings/string_view.h"

namespace omnistage {

// The offset of the first byte that is not part of a valid UTF-8 character;
// nullopt when `text` is all valid.
std::optional<size_t> FirstInvalidUtf8(absl::string_view text);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_UTF8_H_
