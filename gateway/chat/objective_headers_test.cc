// The latency objective headers of a chat completion (objective_headers.h).
#include "gateway/chat/objective_headers.h"

#include <optional>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

// The headers become the request's objectives; a time that is not a whole
// number in 1..600000 is a 400 naming its header.
TEST(ObjectiveHeadersTest, HeadersBecomeTheRequestsObjectives) {
  v1::GenerateRequest request;
  EXPECT_FALSE(ReadObjectiveHeaders({}, &request).has_value());
  EXPECT_FALSE(request.has_objectives());
  EXPECT_FALSE(ReadObjectiveHeaders({"250", "40", "800", "Sheddable"}, &request).has_value());
  EXPECT_EQ(request.objectives().first_output_ms(), 250u);
  EXPECT_EQ(request.objectives().between_outputs_ms(), 40u);
  EXPECT_EQ(request.objectives().first_audio_ms(), 800u);
  EXPECT_EQ(request.objectives().criticality(), v1::CRITICALITY_SHEDDABLE);
  for (const auto& [values, header] :
       {std::pair<ObjectiveHeaderValues, const char*>{{"0", "", "", ""}, "x-slo-ttft-ms"},
        {{"-5", "", "", ""}, "x-slo-ttft-ms"},
        {{"1.5", "", "", ""}, "x-slo-ttft-ms"},
        {{"600001", "", "", ""}, "x-slo-ttft-ms"},
        {{"99999999999999999999", "", "", ""}, "x-slo-ttft-ms"},
        {{"100", "fast", "", ""}, "x-slo-tpot-ms"},
        {{"100", "", "soon", ""}, "x-slo-ttfa-ms"}}) {
    v1::GenerateRequest refused;
    std::optional<ApiError> error = ReadObjectiveHeaders(values, &refused);
    ASSERT_TRUE(error.has_value()) << header;
    EXPECT_EQ(error->http_status, 400);
    EXPECT_EQ(error->param, header);
    EXPECT_EQ(error->code, "invalid_value");
    EXPECT_THAT(error->message, HasSubstr("from 1 to 600000"));
  }
}

TEST(ObjectiveHeadersTest, AnUnknownCriticalityIsA400NamingTheHeader) {
  v1::GenerateRequest refused;
  std::optional<ApiError> error = ReadObjectiveHeaders({"", "", "", "urgent"}, &refused);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->http_status, 400);
  EXPECT_EQ(error->param, "x-slo-criticality");
  EXPECT_THAT(error->message, HasSubstr("expected critical, standard or sheddable, got 'urgent'"));
}

}  // namespace
}  // namespace omnistage
