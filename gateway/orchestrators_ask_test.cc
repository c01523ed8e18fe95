// Orchestrators' unary asks, against an orchestrator service of the test's
// own on 127.0.0.1 (the process test orchestrators_test.sh covers readiness
// and round robin).
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "gateway/orchestrators.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

// Answers GetCaller with the identity the token names ("Bearer alice-..." ->
// "alice"); no token: UNAUTHENTICATED.
class Callers final : public v1::Orchestrator::CallbackService {
 public:
  grpc::ServerUnaryReactor* GetCaller(grpc::CallbackServerContext* context,
                                      const v1::GetCallerRequest*,
                                      v1::CallerInfo* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    auto it = context->client_metadata().find("authorization");
    if (it == context->client_metadata().end()) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no bearer token"));
      return reactor;
    }
    const std::string token(it->second.data(), it->second.size());
    response->set_identity(token.substr(7, token.find('-') - 7));
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

TEST(OrchestratorsTest, AsksWhomATokenStandsFor) {
  Callers service;
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  Orchestrators::Target target;
  target.address = "127.0.0.1:" + std::to_string(port);
  Counter fallbacks(nullptr);
  // The loop: here, whichever thread posts.
  Orchestrators orchestrators(
      target, [](std::function<void()> task) { task(); }, &fallbacks);
  auto ask = [&](const std::string& authorization, grpc::Status* status, v1::CallerInfo* info) {
    absl::Notification done;
    orchestrators.AskCaller(orchestrators.any(), authorization, std::chrono::seconds(10),
                            [&](const grpc::Status& s, const v1::CallerInfo& caller) {
                              *status = s;
                              *info = caller;
                              done.Notify();
                            });
    return done.WaitForNotificationWithTimeout(absl::Seconds(20));
  };
  grpc::Status status;
  v1::CallerInfo info;
  ASSERT_TRUE(ask("Bearer alice-token-0123456789", &status, &info));
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(info.identity(), "alice");
  ASSERT_TRUE(ask("", &status, &info));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  server->Shutdown();
}

}  // namespace
}  // namespace omnistage
