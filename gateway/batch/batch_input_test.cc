#include "gateway/batch/batch_input.h"

#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

constexpr char kChat[] = "/v1/chat/completions";

std::string Line(const std::string& custom_id, const std::string& url = kChat) {
  return R"({"custom_id": ")" + custom_id + R"(", "method": "POST", "url": ")" + url +
         R"(", "body": {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}})";
}

BatchInputError ErrorOf(const std::string& content, int64_t max_lines = 100) {
  auto parsed = ParseBatchInput(content, kChat, max_lines);
  EXPECT_TRUE(std::holds_alternative<BatchInputError>(parsed)) << content;
  return std::holds_alternative<BatchInputError>(parsed) ? std::get<BatchInputError>(parsed)
                                                         : BatchInputError{};
}

TEST(BatchInputTest, ReadsEachLineWithItsNumber) {
  auto parsed = ParseBatchInput(Line("a") + "\n\n" + Line("b") + "\n", kChat, 100);
  ASSERT_TRUE(std::holds_alternative<std::vector<BatchInputLine>>(parsed));
  const auto& lines = std::get<std::vector<BatchInputLine>>(parsed);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].line, 1);
  EXPECT_EQ(lines[0].custom_id, "a");
  EXPECT_EQ(lines[1].line, 3);  // the blank line counted, not kept
  EXPECT_EQ(lines[1].custom_id, "b");
  EXPECT_NE(lines[1].body.find("\"messages\""), std::string::npos);
}

TEST(BatchInputTest, RefusesAFileThatCannotRunNamingTheLine) {
  BatchInputError e = ErrorOf(Line("a") + "\n{not json\n");
  EXPECT_EQ(e.code, "invalid_json_line");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.message.rfind("Line 2: ", 0), 0u) << e.message;

  e = ErrorOf(Line("a") + "\n" + Line("b", "/v1/embeddings"));
  EXPECT_EQ(e.code, "mismatched_endpoint");
  EXPECT_EQ(e.param, "url");
  EXPECT_NE(e.message.find("/v1/embeddings"), std::string::npos);

  e = ErrorOf(Line("a") + "\n" + Line("b") + "\n" + Line("a"));
  EXPECT_EQ(e.code, "duplicate_custom_id");
  EXPECT_EQ(e.line, 3);

  e = ErrorOf(R"({"method": "POST", "url": "/v1/chat/completions", "body": {}})");
  EXPECT_EQ(e.code, "missing_required_parameter");
  EXPECT_EQ(e.param, "custom_id");
  e = ErrorOf(R"({"custom_id": "a", "method": "GET", "url": "/v1/chat/completions", "body": {}})");
  EXPECT_EQ(e.code, "invalid_method");
  e = ErrorOf(R"({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": 3})");
  EXPECT_EQ(e.param, "body");
  e = ErrorOf("[1, 2]");
  EXPECT_EQ(e.code, "invalid_json_line");
  e = ErrorOf(Line(std::string(513, 'x')));
  EXPECT_EQ(e.param, "custom_id");
}

TEST(BatchInputTest, RefusesAnEmptyFileAndOneOfTooManyLines) {
  EXPECT_EQ(ErrorOf("\n  \n").code, "empty_file");
  const std::string three = Line("a") + "\n" + Line("b") + "\n" + Line("c") + "\n";
  BatchInputError e = ErrorOf(three, /*max_lines=*/2);
  EXPECT_EQ(e.code, "too_many_requests");
  EXPECT_EQ(e.line, 0);
  EXPECT_TRUE(
      std::holds_alternative<std::vector<BatchInputLine>>(ParseBatchInput(three, kChat, 3)));
}

TEST(BatchInputTest, KnowsItsEndpoints) {
  EXPECT_TRUE(IsBatchEndpoint("/v1/chat/completions"));
  EXPECT_TRUE(IsBatchEndpoint("/v1/audio/speech"));
  EXPECT_FALSE(IsBatchEndpoint("/v1/embeddings"));
}

}  // namespace
}  // namespace omnistage
