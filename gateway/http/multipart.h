// Multipart: a multipart/form-data request body (RFC 7578), as OpenAI's file
// uploads send it (POST /v1/audio/transcriptions: `file` and the form fields).
//
//   absl::StatusOr<std::vector<FormPart>> parts =
//       ParseMultipart(exchange->Header("Content-Type"), exchange->body());
//   const FormPart* file = FindPart(*parts, "file");
//
// INVALID_ARGUMENT, saying what is wrong, for a Content-Type that is not
// multipart/form-data or names no boundary, a body that does not open with the
// boundary or does not close it, a part without a name, more than kMaxParts
// parts or a part whose headers pass kMaxPartHeaderBytes. Part bodies are kept
// as they are (binary files included); a part's Content-Transfer-Encoding is
// not applied (RFC 7578 deprecates it).
#ifndef OMNISTAGE_GATEWAY_HTTP_MULTIPART_H_
#define OMNISTAGE_GATEWAY_HTTP_MULTIPART_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace omnistage {

inline constexpr size_t kMaxParts = 64;
inline constexpr size_t kMaxPartHeaderBytes = 8192;

struct FormPart {
  // Content-Disposition's name and filename ("" when absent).
  std::string name;
  std::string filename;
  // The part's Content-Type ("" when absent).
  std::string content_type;
  std::string body;
};

// The parts of `body`, in order, per `content_type` (the request's header).
absl::StatusOr<std::vector<FormPart>> ParseMultipart(absl::string_view content_type,
                                                     absl::string_view body);

// The first part named `name`; null when there is none.
const FormPart* FindPart(const std::vector<FormPart>& parts, absl::string_view name);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_MULTIPART_H_
