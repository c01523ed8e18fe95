#include "common/error_proto.h"

#include "common/field_error.h"
#include "common/retry_hint.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(FieldErrorTest, PathsComposeOutward) {
  absl::Status status = AtField(absl::InvalidArgumentError("expected 1..64"), "batch_size");
  EXPECT_EQ(ErrorField(status), "batch_size");
  status = AtField(status, "engine_params");
  EXPECT_EQ(ErrorField(status), "engine_params.batch_size");
  EXPECT_EQ(status.message(), "expected 1..64");
  EXPECT_EQ(ErrorField(absl::InvalidArgumentError("no field")), "");
  EXPECT_TRUE(AtField(absl::OkStatus(), "x").ok());
  const absl::Status reworded = WithMessage(status, "batch_size: expected 1..64 (replica 0)");
  EXPECT_EQ(reworded.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reworded.message(), "batch_size: expected 1..64 (replica 0)");
  EXPECT_EQ(ErrorField(reworded), "engine_params.batch_size");
}

TEST(ErrorProtoTest, CarriesWhereAndWhyBothWays) {
  const absl::Status status =
      AtField(absl::InvalidArgumentError("unknown extra parameter 'voice'"), "params.extra.voice");
  const v1::Error error = ErrorProto(status, 2, 1, "vocoder-1");
  EXPECT_EQ(error.code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(error.stage_id(), 2);
  EXPECT_EQ(error.replica(), 1);
  EXPECT_EQ(error.instance_id(), "vocoder-1");
  EXPECT_EQ(error.field(), "params.extra.voice");
  const absl::Status back = StatusFromErrorProto(error);
  EXPECT_EQ(back.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(back.message(), "unknown extra parameter 'voice'");
  EXPECT_EQ(ErrorField(back), "params.extra.voice");
}

TEST(ErrorProtoTest, CarriesARetryHintBothWays) {
  const v1::Error error = ErrorProto(
      WithRetryAfter(absl::ResourceExhaustedError("full"), absl::Milliseconds(250)));
  EXPECT_EQ(error.retry_after_ms(), 250);
  EXPECT_EQ(RetryAfterOf(StatusFromErrorProto(error)), absl::Milliseconds(250));
  EXPECT_EQ(ErrorProto(absl::ResourceExhaustedError("full")).retry_after_ms(), 0);
  EXPECT_EQ(RetryAfterOf(StatusFromErrorProto(ErrorProto(absl::InternalError("x")))),
            std::nullopt);
}

TEST(ErrorProtoTest, DefaultsSayNoStageOrReplica) {
  const v1::Error error = ErrorProto(absl::UnavailableError("draining"));
  EXPECT_EQ(error.stage_id(), -1);
  EXPECT_EQ(error.replica(), -1);
  EXPECT_EQ(error.instance_id(), "");
}

TEST(ErrorProtoTest, AnErrorNeverReadsAsOk) {
  v1::Error error;
  error.set_message("code left out");
  EXPECT_EQ(StatusFromErrorProto(error).code(), absl::StatusCode::kInternal);
  error.set_code(99);
  EXPECT_EQ(StatusFromErrorProto(error).code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace omnistage
