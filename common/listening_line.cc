#include "common/listening_line.h"

#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace omnistage {

std::string ListeningLine::Field(absl::string_view key) const {
  for (const auto& [name, value] : fields) {
    if (name == key) return value;
  }
  return "";
}

int ListeningLine::Number(absl::string_view key) const {
  int number = 0;
  if (!absl::SimpleAtoi(Field(key), &number) || number < 0) return 0;
  return number;
}

std::string FormatListeningLine(const ListeningLine& line) {
  std::string text = absl::StrCat(kListeningPrefix, line.port, " address=", line.address);
  for (const auto& [key, value] : line.fields) absl::StrAppend(&text, " ", key, "=", value);
  return text;
}

void PrintListeningLine(const ListeningLine& line) {
  std::cout << FormatListeningLine(line) << std::endl;
}

absl::StatusOr<ListeningLine> FindListeningLine(absl::string_view output) {
  size_t at = 0;
  while (at < output.size() && output.substr(at, kListeningPrefix.size()) != kListeningPrefix) {
    const size_t newline = output.find('\n', at);
    if (newline == absl::string_view::npos) return absl::NotFoundError("no listening line yet");
    at = newline + 1;
  }
  if (at >= output.size()) return absl::NotFoundError("no listening line yet");
  const size_t end = output.find('\n', at);
  const absl::string_view text = output.substr(at, end == absl::string_view::npos
                                                       ? absl::string_view::npos
                                                       : end - at);
  auto unreadable = [&] {
    return absl::InvalidArgumentError(absl::StrCat("unreadable listening line '", text, "'"));
  };
  ListeningLine line;
  bool first = true;
  for (absl::string_view word : absl::StrSplit(text.substr(kListeningPrefix.find("port=")), ' ',
                                               absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(word, absl::MaxSplits('=', 1));
    if (kv.second.empty()) return unreadable();
    if (first) {
      if (!absl::SimpleAtoi(kv.second, &line.port) || line.port <= 0 || line.port > 65535) {
        return unreadable();
      }
      first = false;
    } else if (kv.first == "address") {
      line.address = std::string(kv.second);
    } else {
      line.fields.emplace_back(kv.first, kv.second);
    }
  }
  if (line.address.empty()) return unreadable();
  return line;
}

}  // namespace omnistage
