// The composition: a start that fails at any part unwinds what was made before
// it (its ports free again, no worker left running), and each check runs before
// anything is spawned.
#include "orchestrator/orchestrator.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/free_port.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

// A TCP socket listening on 127.0.0.1:`port`; -1 when it cannot.
int ListenOn(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 1) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

OrchestratorOptions Options(const std::string& stage) {
  absl::StatusOr<PipelineConfig> config = ParsePipelineConfig(
      absl::StrCat("stages:\n  - name: llm\n", stage,
                   "    final_output: true\n    output_modality: tokens\n"));
  EXPECT_TRUE(config.ok()) << config.status();
  OrchestratorOptions options;
  options.config = *config;
  options.handshake_timeout = absl::Seconds(2);
  return options;
}

constexpr char kRemoteStage[] = "    addresses: [\"127.0.0.1:1\"]\n";
constexpr char kSpawnedStage[] = "    engine: sim_llm\n    replicas: 1\n";

TEST(OrchestratorStartTest, AFailedPartUnwindsThePartsBeforeIt) {
  const int client_port = FreeLoopbackPort();
  ASSERT_GT(client_port, 0);
  const int taken = ListenOn(0);
  ASSERT_GE(taken, 0);
  sockaddr_in bound{};
  socklen_t size = sizeof(bound);
  getsockname(taken, reinterpret_cast<sockaddr*>(&bound), &size);

  OrchestratorOptions options = Options(kRemoteStage);
  options.listen = absl::StrCat("127.0.0.1:", client_port);
  // The peer port comes after the client server: it cannot listen.
  options.peer_listen = absl::StrCat("127.0.0.1:", ntohs(bound.sin_port));
  absl::StatusOr<std::unique_ptr<Orchestrator>> failed = Orchestrator::Start(options);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("cannot listen on"));
  close(taken);
  // The client server that had started is shut down: its port is free.
  const int again = ListenOn(client_port);
  EXPECT_GE(again, 0) << "port " << client_port << " still held";
  if (again >= 0) close(again);
}

TEST(OrchestratorStartTest, ChecksComeBeforeAnyWorkerIsSpawned) {
  OrchestratorOptions options = Options(kSpawnedStage);
  // Spawning would fail on this binary; the bad tokens file is found first.
  options.worker_binary = TempPath("no-such-stage-worker");
  options.tokens_file = TempPath("no-such-tokens.yaml");
  absl::StatusOr<std::unique_ptr<Orchestrator>> failed = Orchestrator::Start(options);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("no-such-tokens.yaml"));

  options.tokens_file.clear();
  options.worker_tls = {TempPath("no.crt"), TempPath("no.key"), ""};
  failed = Orchestrator::Start(options);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("worker TLS"));

  options.worker_tls = {};
  failed = Orchestrator::Start(options);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("stage 0 (llm) replica 0"));
}

TEST(OrchestratorStartTest, ServesThenStopsEveryPartOnDestruction) {
  const int client_port = FreeLoopbackPort();
  ASSERT_GT(client_port, 0);
  OrchestratorOptions options = Options(kRemoteStage);
  options.listen = absl::StrCat("127.0.0.1:", client_port);
  options.metrics_listen = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<Orchestrator>> orchestrator = Orchestrator::Start(options);
  ASSERT_TRUE(orchestrator.ok()) << orchestrator.status();
  EXPECT_EQ((*orchestrator)->port(), client_port);
  EXPECT_GT((*orchestrator)->metrics_port(), 0);
  std::string node;
  (*orchestrator)->RunOnLoop([&](PipelineCore& core) { node = core.node_id(); });
  EXPECT_EQ(node, (*orchestrator)->node_id());
  orchestrator->reset();
  const int again = ListenOn(client_port);
  EXPECT_GE(again, 0) << "port " << client_port << " still held";
  if (again >= 0) close(again);
}

}  // namespace
}  // namespace omnistage
