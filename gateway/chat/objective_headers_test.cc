// The latency objective headers of a chat completion (objective_headers.h).
#include "gateway/chat/objective_headers.h"

#include <optional>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

// x-slo-ttft-ms and x-slo-ttfa-ms become the request's objectives; a value
// that is not a whole number in 1..600000 is a 400 naming its header.
TEST(ObjectiveHeadersTest, HeadersBecomeTheRequestsObjectives) {
  v1::GenerateRequest request;
  EXPECT_FALSE(ReadObjectiveHeaders("", "", &request).has_value());
  EXPECT_FALSE(request.has_objectives());
  EXPECT_FALSE(ReadObjectiveHeaders("250", "800", &request).has_value());
  EXPECT_EQ(request.objectives().first_output_ms(), 250u);
  EXPECT_EQ(request.objectives().first_audio_ms(), 800u);
  for (const auto& [ttft, ttfa, header] :
       {std::tuple<const char*, const char*, const char*>{"0", "", "x-slo-ttft-ms"},
        {"-5", "", "x-slo-ttft-ms"},
        {"1.5", "", "x-slo-ttft-ms"},
        {"600001", "", "x-slo-ttft-ms"},
        {"99999999999999999999", "", "x-slo-ttft-ms"},
        {"100", "soon", "x-slo-ttfa-ms"}}) {
    v1::GenerateRequest refused;
    std::optional<ApiError> error = ReadObjectiveHeaders(ttft, ttfa, &refused);
    ASSERT_TRUE(error.has_value()) << ttft << " " << ttfa;
    EXPECT_EQ(error->http_status, 400);
    EXPECT_EQ(error->param, header);
    EXPECT_EQ(error->code, "invalid_value");
    EXPECT_THAT(error->message, HasSubstr("from 1 to 600000"));
  }
}

}  // namespace
}  // namespace omnistage
