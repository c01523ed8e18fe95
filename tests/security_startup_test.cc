// Security at start-up, as real processes: certificate files that would only
// fail in every handshake stop a binary with one line and exit code 2, and
// plaintext on an address other than loopback is announced loudly.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/testing/test_pki.h"
#include "common/testing/child_process.h"
#include "gtest/gtest.h"
#include "tests/pipeline_harness.h"

namespace omnistage {
namespace {

// A process's stdout and stderr, for start-up lines.
std::unique_ptr<ChildProcess> StartCapturingStderr(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1"});
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(argv);
  EXPECT_TRUE(process.ok()) << process.status();
  return process.ok() ? *std::move(process) : nullptr;
}

TEST(SecurityStartUpTest, BadCertificatesStopStartUpWithOneLine) {
  const std::string dir = TestDirectory();
  TestPki pki(dir);
  CertOptions expired;
  expired.not_before = -absl::Hours(48);
  expired.not_after = -absl::Hours(24);
  TlsFiles stale = pki.Issue("stale", expired);
  std::unique_ptr<ChildProcess> worker = StartCapturingStderr(
      {kStageWorkerBinary, "--tls_cert=" + stale.cert, "--tls_key=" + stale.key});
  ASSERT_NE(worker, nullptr);
  absl::StatusOr<std::string> line = worker->WaitForLine("expired on", absl::Seconds(10));
  ASSERT_TRUE(line.ok()) << worker->output();
  EXPECT_TRUE(absl::StartsWith(*line, "stage_worker: --tls_cert/--tls_key/--tls_client_ca: "))
      << *line;
  EXPECT_EQ(worker->Wait(absl::Seconds(10)), 2);

  const TlsFiles good = pki.Issue("good", {});
  const std::string config = dir + "/pipeline.yaml";
  std::ofstream(config) << "stages:\n  - name: llm\n    engine: sim_llm\n"
                           "    addresses: [\"127.0.0.1:1\"]\n    final_output: true\n"
                           "    output_modality: tokens\n";
  std::unique_ptr<ChildProcess> orchestrator = StartCapturingStderr(
      {kOrchestratorBinary, "--config=" + config, "--tls_cert=" + good.cert,
       "--tls_key=" + stale.key});
  ASSERT_NE(orchestrator, nullptr);
  line = orchestrator->WaitForLine("is not the key", absl::Seconds(10));
  ASSERT_TRUE(line.ok()) << orchestrator->output();
  EXPECT_EQ(orchestrator->Wait(absl::Seconds(10)), 2);
}

TEST(SecurityStartUpTest, PlaintextOffLoopbackIsLoud) {
  std::unique_ptr<ChildProcess> worker =
      StartCapturingStderr({kStageWorkerBinary, "--listen=0.0.0.0:0"});
  ASSERT_NE(worker, nullptr);
  absl::StatusOr<std::string> line = worker->WaitForLine("PLAINTEXT", absl::Seconds(10));
  ASSERT_TRUE(line.ok()) << worker->output();
  EXPECT_TRUE(absl::StrContains(*line, "the stage worker serves 0.0.0.0:0 without TLS")) << *line;
  std::unique_ptr<ChildProcess> quiet =
      StartCapturingStderr({kStageWorkerBinary, "--listen=127.0.0.1:0"});
  ASSERT_NE(quiet, nullptr);
  ASSERT_TRUE(quiet->WaitForLine("listening port=", absl::Seconds(10)).ok());
  EXPECT_FALSE(absl::StrContains(quiet->output(), "PLAINTEXT")) << quiet->output();
}

}  // namespace
}  // namespace omnistage
