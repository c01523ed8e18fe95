// One grpc.health.v1 Check over `channel` for tests: the serving status of
// `service` ("" is liveness); a failed call is a test failure (and UNKNOWN).
#ifndef OMNISTAGE_COMMON_GRPC_TESTING_HEALTH_CHECK_H_
#define OMNISTAGE_COMMON_GRPC_TESTING_HEALTH_CHECK_H_

#include <chrono>
#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "protos/health.grpc.pb.h"

namespace omnistage {

inline grpc::health::v1::HealthCheckResponse::ServingStatus HealthOf(
    std::shared_ptr<grpc::Channel> channel, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(std::move(channel));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_GRPC_TESTING_HEALTH_CHECK_H_
