#include "gateway/http/json_body.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

using nlohmann::json;

constexpr char kNotJson[] =
    "We could not parse the JSON body of your request. The body must be a JSON object "
    "(https://platform.openai.com/docs/api-reference).";

// Follows where a parse is (the path of the value being read), and keeps what
// the parser said when it stopped.
class WhereSax : public json::json_sax_t {
 public:
  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(false); }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override { return Open(true); }
  bool end_array() override { return Close(); }
  bool key(string_t& name) override {
    frames_.back().key = name;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& error) override {
    position_ = position;
    message_ = error.what();
    return false;
  }

  // The path of the value being read when the parse stopped ("" at the top).
  std::string Path() const {
    std::string path;
    for (const Frame& frame : frames_) {
      if (frame.array) {
        // The element being read is the one after the last read.
        absl::StrAppend(&path, "[", frame.values, "]");
      } else if (!frame.key.empty()) {
        absl::StrAppend(&path, path.empty() ? "" : ".", frame.key);
      }
    }
    return path;
  }
  std::size_t position() const { return position_; }
  const std::string& message() const { return message_; }

 private:
  struct Frame {
    bool array = false;
    std::string key;
    int64_t values = 0;  // an array's elements read
  };
  bool Value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().values;
    return true;
  }
  bool Open(bool array) {
    frames_.push_back({array, "", 0});
    return true;
  }
  bool Close() {
    frames_.pop_back();
    return Value();
  }

  std::vector<Frame> frames_;
  std::size_t position_ = 0;
  std::string message_;
};

}  // namespace

std::variant<json, ApiError> ReadJsonBody(const std::string& body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded()) {
    if (!parsed.is_object()) return InvalidRequest("", kNotJson);
    return parsed;
  }
  // Read again, following where it stops: a byte that is not UTF-8 is named
  // with the field that holds it.
  WhereSax where;
  json::sax_parse(body, &where);
  if (absl::StrContains(where.message(), "ill-formed UTF-8") ||
      absl::StrContains(where.message(), "invalid string: surrogate")) {
    const std::string path = where.Path();
    return InvalidRequest(
        path, absl::StrCat("The request body is not valid UTF-8: byte ", where.position(),
                           path.empty() ? "" : absl::StrCat(" (in '", path, "')"),
                           " is not part of a UTF-8 character. JSON text must be UTF-8: send "
                           "text as UTF-8, and binary data (audio) as base64."));
  }
  return InvalidRequest("", kNotJson);
}

}  // namespace omnistage
