// TLS through StartGrpcServer and ChannelCredentialsFor, against certificates
// made by the test: handshakes that must work, handshakes that must be refused
// (plaintext client, unknown CA, wrong host, missing or expired client
// certificate), and a certificate rotated under an open stream.
#include "common/grpc/tls.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/testing/test_pki.h"
#include "gtest/gtest.h"
#include "protos/health.grpc.pb.h"

namespace omnistage {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

constexpr char kService[] = "omnistage.test.Ready";

std::string TestDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base != nullptr ? base : "/tmp", "/", name);
  std::string command = "mkdir -p '" + dir + "'";
  EXPECT_EQ(std::system(command.c_str()), 0);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A server's files without the CA: TLS without client certificates.
TlsFiles WithoutClientCa(TlsFiles files) {
  files.ca.clear();
  return files;
}

class TlsTest : public ::testing::Test {
 protected:
  TlsTest() : dir_(TestDir(::testing::UnitTest::GetInstance()->current_test_info()->name())),
              pki_(dir_), other_pki_(dir_, "other-ca") {}

  void Serve(const TlsFiles& tls) {
    GrpcServerOptions options;
    options.readiness_service = kService;
    options.tls = tls;
    absl::StatusOr<StartedServer> started = StartGrpcServer(options, {});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
  }

  // A health check over a new channel with `tls`; `target_name` overrides the
  // name the server's certificate must carry.
  grpc::Status Check(const TlsFiles& tls, const std::string& target_name = "",
                     std::string* server_cert = nullptr) {
    grpc::ChannelArguments args;
    if (!target_name.empty()) args.SetSslTargetNameOverride(target_name);
    auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_.port),
                                             ChannelCredentialsFor(tls), args);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    HealthCheckRequest request;
    request.set_service(kService);
    HealthCheckResponse response;
    grpc::Status status = Health::NewStub(channel)->Check(&context, request, &response);
    if (server_cert != nullptr && context.auth_context() != nullptr) {
      for (const grpc::string_ref& pem : context.auth_context()->FindPropertyValues(
               GRPC_X509_PEM_CERT_PROPERTY_NAME)) {
        server_cert->assign(pem.data(), pem.size());
      }
    }
    return status;
  }

  void TearDown() override {
    if (server_.server != nullptr) server_.server->Shutdown();
  }

  const std::string dir_;
  TestPki pki_;
  TestPki other_pki_;
  StartedServer server_;
};

TEST_F(TlsTest, ServerAuthenticatedTls) {
  Serve(WithoutClientCa(pki_.Issue("server", {})));
  EXPECT_TRUE(Check(TlsFiles{"", "", pki_.ca_file()}).ok());
}

TEST_F(TlsTest, PlaintextClientIsRefusedByATlsPort) {
  Serve(pki_.Issue("server", {}));
  EXPECT_EQ(Check(TlsFiles{}).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, ServerFromAnotherCaIsRefused) {
  Serve(other_pki_.Issue("server", {}));
  EXPECT_EQ(Check(TlsFiles{"", "", pki_.ca_file()}).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, ServerCertificateMustNameTheHostDialled) {
  CertOptions elsewhere;
  elsewhere.dns_names = {"talker.omnistage.svc"};
  elsewhere.ips = {"10.9.8.7"};
  Serve(WithoutClientCa(pki_.Issue("server", elsewhere)));
  const TlsFiles trust{"", "", pki_.ca_file()};
  EXPECT_EQ(Check(trust).error_code(), grpc::StatusCode::UNAVAILABLE);
  // Dialled by its DNS name (as discovery does: the address is an IP, the name
  // checked is the Service's), it is accepted.
  EXPECT_TRUE(Check(trust, "talker.omnistage.svc").ok());
  EXPECT_EQ(Check(trust, "vocoder.omnistage.svc").error_code(), grpc::StatusCode::UNAVAILABLE);
}

// A certificate that expired while the server ran (start-up would refuse it):
// clients refuse the handshake.
TEST_F(TlsTest, ExpiredServerCertificateIsRefused) {
  CertOptions expired;
  expired.not_before = -absl::Hours(48);
  expired.not_after = -absl::Hours(24);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0",
                           ServerCredentialsFor(WithoutClientCa(pki_.Issue("stale", expired))),
                           &server_.port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  grpc::EnableDefaultHealthCheckService(true);
  server_.server = builder.BuildAndStart();
  ASSERT_NE(server_.server, nullptr);
  EXPECT_EQ(Check(TlsFiles{"", "", pki_.ca_file()}).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MutualTlsNeedsAClientCertificateFromTheCa) {
  TlsFiles server = pki_.Issue("server", {});
  Serve(server);  // server.ca is set: client certificates are required.
  EXPECT_EQ(Check(TlsFiles{"", "", pki_.ca_file()}).error_code(), grpc::StatusCode::UNAVAILABLE);
  TlsFiles rogue = other_pki_.Issue("rogue", {});
  rogue.ca = pki_.ca_file();
  EXPECT_EQ(Check(rogue).error_code(), grpc::StatusCode::UNAVAILABLE);
  CertOptions expired;
  expired.not_before = -absl::Hours(48);
  expired.not_after = -absl::Hours(24);
  EXPECT_EQ(Check(pki_.Issue("expired", expired)).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(Check(pki_.Issue("client", {})).ok());
}

TEST_F(TlsTest, RotatedCertificateServesNewConnectionsWithoutDroppingOpenStreams) {
  const TlsFiles server = WithoutClientCa(pki_.Issue("server", {}));
  Serve(server);
  const TlsFiles trust{"", "", pki_.ca_file()};
  std::string first;
  ASSERT_TRUE(Check(trust, "", &first).ok());
  EXPECT_EQ(first, ReadFile(server.cert));

  // An open stream: health Watch over its own channel.
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_.port),
                                     ChannelCredentialsFor(trust));
  grpc::ClientContext watch_context;
  HealthCheckRequest request;
  request.set_service(kService);
  auto watch = Health::NewStub(channel)->Watch(&watch_context, request);
  HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);

  pki_.Issue("server", {});  // Same files, new certificate and key.
  const std::string rotated = ReadFile(server.cert);
  ASSERT_NE(rotated, first);
  std::string seen;
  const absl::Time deadline = absl::Now() + absl::Seconds(4 * kTlsRefreshSeconds + 5);
  while (seen != rotated && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
    ASSERT_TRUE(Check(trust, "", &seen).ok());
  }
  EXPECT_EQ(seen, rotated) << "new connections still get the old certificate";

  // The stream opened before the rotation is still there and still delivers.
  SetReady(server_.server.get(), kService, false);
  ASSERT_TRUE(watch->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);
  watch_context.TryCancel();
  watch->Finish();
}

TEST_F(TlsTest, CheckTlsFilesNamesWhatIsWrong) {
  TlsFiles good = pki_.Issue("server", {});
  EXPECT_TRUE(CheckTlsFiles(good, TlsSide::kServer).ok());
  EXPECT_TRUE(CheckTlsFiles(TlsFiles{}, TlsSide::kServer).ok());
  EXPECT_TRUE(CheckTlsFiles(TlsFiles{"", "", good.ca}, TlsSide::kClient).ok());
  EXPECT_EQ(CheckTlsFiles(TlsFiles{"", "", good.ca}, TlsSide::kServer).message(),
            "a TLS server needs a certificate and its key");
  EXPECT_EQ(CheckTlsFiles(TlsFiles{good.cert, "", ""}, TlsSide::kClient).message(),
            "a certificate without its key");
  TlsFiles missing = good;
  missing.cert = dir_ + "/nope.crt";
  EXPECT_EQ(CheckTlsFiles(missing, TlsSide::kServer).message(),
            "cannot read " + dir_ + "/nope.crt: No such file or directory");
  TlsFiles swapped = good;
  swapped.cert = good.key;
  EXPECT_EQ(CheckTlsFiles(swapped, TlsSide::kServer).message(),
            good.key + " holds no PEM certificate");
  TlsFiles mismatched = good;
  mismatched.key = pki_.Issue("client", {}).key;
  EXPECT_EQ(CheckTlsFiles(mismatched, TlsSide::kServer).message(),
            mismatched.key + " is not the key of the certificate in " + good.cert);
  CertOptions expired;
  expired.not_before = -absl::Hours(48);
  expired.not_after = -absl::Hours(24);
  absl::Status stale = CheckTlsFiles(pki_.Issue("stale", expired), TlsSide::kServer);
  EXPECT_NE(stale.message().find("expired on"), absl::string_view::npos) << stale;
}

}  // namespace
}  // namespace omnistage
