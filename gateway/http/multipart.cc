#include "gateway/http/multipart.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace omnistage {
namespace {

// A header parameter's value (`key=value` or `key="value"`, the key without
// regard to case), from the text after the header's first ';'.
std::optional<std::string> Parameter(absl::string_view params, absl::string_view key) {
  while (!params.empty()) {
    params = absl::StripLeadingAsciiWhitespace(params);
    const size_t eq = params.find('=');
    if (eq == absl::string_view::npos) return std::nullopt;
    const absl::string_view name = absl::StripAsciiWhitespace(params.substr(0, eq));
    params.remove_prefix(eq + 1);
    std::string value;
    if (!params.empty() && params.front() == '"') {
      // A quoted string; a backslash escapes the next character.
      size_t i = 1;
      for (; i < params.size() && params[i] != '"'; ++i) {
        if (params[i] == '\\' && i + 1 < params.size()) ++i;
        value.push_back(params[i]);
      }
      params.remove_prefix(std::min(params.size(), i + 1));
      const size_t semi = params.find(';');
      params.remove_prefix(semi == absl::string_view::npos ? params.size() : semi + 1);
    } else {
      const size_t semi = params.find(';');
      value = std::string(absl::StripAsciiWhitespace(params.substr(0, semi)));
      params.remove_prefix(semi == absl::string_view::npos ? params.size() : semi + 1);
    }
    if (absl::EqualsIgnoreCase(name, key)) return value;
  }
  return std::nullopt;
}

absl::Status ReadHeaders(absl::string_view headers, FormPart* part) {
  bool disposition = false;
  for (absl::string_view line : absl::StrSplit(headers, "\r\n", absl::SkipEmpty())) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("a part's header has no ':': '", line, "'"));
    }
    const absl::string_view name = absl::StripAsciiWhitespace(line.substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (absl::EqualsIgnoreCase(name, "Content-Disposition")) {
      const size_t semi = value.find(';');
      if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(value.substr(0, semi)), "form-data") ||
          semi == absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a part's Content-Disposition is not form-data with a name: '", value, "'"));
      }
      disposition = true;
      part->name = Parameter(value.substr(semi + 1), "name").value_or("");
      part->filename = Parameter(value.substr(semi + 1), "filename").value_or("");
    } else if (absl::EqualsIgnoreCase(name, "Content-Type")) {
      part->content_type = std::string(value);
    }
  }
  if (!disposition || part->name.empty()) {
    return absl::InvalidArgumentError("a part has no Content-Disposition naming it");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<FormPart>> ParseMultipart(absl::string_view content_type,
                                                     absl::string_view body) {
  const size_t semi = content_type.find(';');
  if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(content_type.substr(0, semi)),
                              "multipart/form-data")) {
    return absl::InvalidArgumentError(absl::StrCat("the body must be multipart/form-data, not '",
                                                   content_type.substr(0, semi), "'"));
  }
  const std::optional<std::string> boundary =
      semi == absl::string_view::npos ? std::nullopt
                                      : Parameter(content_type.substr(semi + 1), "boundary");
  if (!boundary.has_value() || boundary->empty() || boundary->size() > 70) {
    return absl::InvalidArgumentError(
        "the multipart/form-data Content-Type names no boundary (1 to 70 characters)");
  }
  const std::string opening = absl::StrCat("--", *boundary);
  const std::string delimiter = absl::StrCat("\r\n--", *boundary);
  // Anything before the first boundary is a preamble, to be ignored.
  size_t at = body.rfind(opening, 0) == 0 ? 0 : body.find(delimiter);
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError("the body does not hold its boundary");
  }
  at += at == 0 ? opening.size() : delimiter.size();
  std::vector<FormPart> parts;
  for (;;) {
    // After a boundary: "--" closes the body, else a line break opens a part.
    if (body.substr(at, 2) == "--") return parts;
    const size_t line_end = body.find("\r\n", at);
    if (line_end == absl::string_view::npos) {
      return absl::InvalidArgumentError("the body ends before its closing boundary");
    }
    at = line_end + 2;
    const size_t headers_end = body.find("\r\n\r\n", at);
    const bool no_headers = body.substr(at, 2) == "\r\n";
    if (!no_headers &&
        (headers_end == absl::string_view::npos || headers_end - at > kMaxPartHeaderBytes)) {
      return absl::InvalidArgumentError(
          headers_end == absl::string_view::npos
              ? "the body ends inside a part's headers"
              : absl::StrCat("a part's headers pass ", kMaxPartHeaderBytes, " bytes"));
    }
    if (parts.size() == kMaxParts) {
      return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxParts, " parts"));
    }
    FormPart part;
    if (absl::Status s = ReadHeaders(no_headers ? "" : body.substr(at, headers_end - at), &part);
        !s.ok()) {
      return s;
    }
    at = no_headers ? at + 2 : headers_end + 4;
    const size_t end = body.find(delimiter, at);
    if (end == absl::string_view::npos) {
      return absl::InvalidArgumentError("the body ends before its closing boundary");
    }
    part.body = std::string(body.substr(at, end - at));
    parts.push_back(std::move(part));
    at = end + delimiter.size();
  }
}

const FormPart* FindPart(const std::vector<FormPart>& parts, absl::string_view name) {
  for (const FormPart& part : parts) {
    if (part.name == name) return &part;
  }
  return nullptr;
}

}  // namespace omnistage
