// A worker serving mTLS: only clients with a certificate from its CA get a
// session, and an Abort on a session counts only from the identity that opened
// it, even with the session's exact id.
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc/testing/test_pki.h"
#include "common/grpc/tls.h"
#include "gtest/gtest.h"
#include "stage_worker/testing/worker_service_harness.h"
#include "stage_worker/testing/worker_test_client.h"

namespace omnistage {
namespace {

class WorkerTlsTest : public WorkerServiceTest {
 protected:
  WorkerTlsTest()
      : dir_(absl::StrCat(std::getenv("TEST_TMPDIR"), "/", Name())),
        pki_((std::system(("mkdir -p " + dir_).c_str()), dir_)),
        other_pki_(dir_, "other-ca") {}

  static std::string Name() {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  void SetUp() override {
    server_tls_ = pki_.Issue("worker", {});  // Its CA: client certificates required.
    StartWorker({{"step_time_us", "2000"}});
  }

  // A client presenting `identity` (its certificate's DNS name) from `pki`.
  std::unique_ptr<WorkerTestClient> Client(TestPki& pki, const std::string& identity) {
    CertOptions options;
    options.dns_names = {identity};
    TlsFiles files = pki.Issue(identity, options);
    files.ca = pki_.ca_file();  // Trusts the worker's CA either way.
    return std::make_unique<WorkerTestClient>(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", server_->port()), ChannelCredentialsFor(files)));
  }

  const std::string dir_;
  TestPki pki_;
  TestPki other_pki_;
};

TEST_F(WorkerTlsTest, OnlyClientsWithACertificateFromTheCaGetASession) {
  WorkerTestClient plaintext(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                                 grpc::InsecureChannelCredentials()));
  EXPECT_FALSE(plaintext.Connect().ok());
  TlsFiles no_certificate{"", "", pki_.ca_file()};
  WorkerTestClient anonymous(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                                 ChannelCredentialsFor(no_certificate)));
  EXPECT_FALSE(anonymous.Connect().ok());
  EXPECT_FALSE(Client(other_pki_, "rogue")->Connect().ok());
  std::unique_ptr<WorkerTestClient> orchestrator = Client(pki_, "orchestrator-a");
  ASSERT_TRUE(orchestrator->Connect().ok());
}

TEST_F(WorkerTlsTest, AbortCountsOnlyFromTheIdentityThatOpenedTheSession) {
  std::unique_ptr<WorkerTestClient> owner = Client(pki_, "orchestrator-a");
  ASSERT_TRUE(owner->Connect().ok());
  owner->Add("r1", "keep going", /*max_tokens=*/100000);
  ASSERT_TRUE(owner->Next(absl::Seconds(10)).has_value());

  // Another orchestrator of the same CA, knowing the session's exact id.
  std::unique_ptr<WorkerTestClient> other = Client(pki_, "orchestrator-b");
  ASSERT_TRUE(other->Connect().ok());
  v1::WorkerAbortRequest request;
  request.set_session_id(owner->session_id());
  request.add_request_ids("r1");
  v1::WorkerAbortResponse response;
  grpc::ClientContext context;
  grpc::Status status = other->stub().Abort(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(status.error_message(), "unknown session '" + owner->session_id() + "'");

  absl::StatusOr<std::vector<std::string>> aborted = owner->Abort({"r1"});
  ASSERT_TRUE(aborted.ok()) << aborted.status();
  EXPECT_EQ(*aborted, std::vector<std::string>{"r1"});
}

}  // namespace
}  // namespace omnistage
