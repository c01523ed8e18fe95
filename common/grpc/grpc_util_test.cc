// A refusal's retry hint on the wire: google.rpc.RetryInfo in the status
// details, read back by any gRPC client (and by FromGrpcStatus).
#include "common/grpc/grpc_util.h"

#include "common/retry_hint.h"
#include "gtest/gtest.h"
#include "protos/rpc_status.pb.h"

namespace omnistage {
namespace {

TEST(GrpcStatusTest, ARetryHintTravelsAsRetryInfo) {
  const grpc::Status status = ToGrpcStatus(
      WithRetryAfter(absl::ResourceExhaustedError("the queue is full"), absl::Milliseconds(1500)));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(status.error_message(), "the queue is full");
  google::rpc::Status details;
  ASSERT_TRUE(details.ParseFromString(status.error_details()));
  EXPECT_EQ(details.code(), static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED));
  ASSERT_EQ(details.details_size(), 1);
  EXPECT_EQ(details.details(0).type_url(), "type.googleapis.com/google.rpc.RetryInfo");
  google::rpc::RetryInfo retry;
  ASSERT_TRUE(details.details(0).UnpackTo(&retry));
  EXPECT_EQ(retry.retry_delay().seconds(), 1);
  EXPECT_EQ(retry.retry_delay().nanos(), 500000000);
  const absl::Status back = FromGrpcStatus(status);
  EXPECT_EQ(back.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(RetryAfterOf(back), absl::Milliseconds(1500));
}

TEST(GrpcStatusTest, WithoutAHintNoDetails) {
  const grpc::Status status = ToGrpcStatus(absl::ResourceExhaustedError("x"));
  EXPECT_TRUE(status.error_details().empty());
  EXPECT_EQ(RetryAfterOf(FromGrpcStatus(status)), std::nullopt);
}

}  // namespace
}  // namespace omnistage
