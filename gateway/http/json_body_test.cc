// A body read as a JSON object: bytes that are not UTF-8 are named with the
// field that holds them; what is not JSON, or not an object, is said so.
#include "gateway/http/json_body.h"

#include <string>
#include <variant>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

ApiError Refused(const std::string& body) {
  std::variant<nlohmann::json, ApiError> read = ReadJsonBody(body);
  EXPECT_TRUE(std::holds_alternative<ApiError>(read)) << body;
  return std::holds_alternative<ApiError>(read) ? std::get<ApiError>(read) : ApiError{};
}

TEST(JsonBodyTest, AnObjectIsRead) {
  std::variant<nlohmann::json, ApiError> read = ReadJsonBody(R"({"model": "m", "n": [1, "é"]})");
  ASSERT_TRUE(std::holds_alternative<nlohmann::json>(read));
  EXPECT_EQ(std::get<nlohmann::json>(read)["n"][1], "é");
}

TEST(JsonBodyTest, BytesThatAreNotUtf8AreNamedWithTheirField) {
  ApiError error = Refused(
      "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"ok\"}, "
      "{\"role\": \"user\", \"content\": \"bad \xff here\"}]}");
  EXPECT_EQ(error.http_status, 400);
  EXPECT_EQ(error.type, "invalid_request_error");
  EXPECT_EQ(error.param, "messages[1].content");
  EXPECT_NE(error.message.find("not valid UTF-8"), std::string::npos) << error.message;
  EXPECT_NE(error.message.find("messages[1].content"), std::string::npos) << error.message;

  EXPECT_EQ(Refused("{\"input\": \"\xc3\"}").param, "input");  // a cut-short character
  EXPECT_EQ(Refused("{\"a\": {\"b\": [1, 2, \"\xed\xa0\x80\"]}}").param, "a.b[2]");  // a surrogate
  EXPECT_EQ(Refused("[\"\xff\"]").param, "[0]");
}

TEST(JsonBodyTest, WhatIsNotAJsonObjectIsSaidSo) {
  for (const char* body : {"not json", "[1, 2]", "{\"a\": }", ""}) {
    ApiError error = Refused(body);
    EXPECT_EQ(error.http_status, 400) << body;
    EXPECT_EQ(error.param, "") << body;
    EXPECT_NE(error.message.find("could not parse the JSON body"), std::string::npos) << body;
  }
}

}  // namespace
}  // namespace omnistage
