#include "client/status_command.h"

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/generate_output.h"
#include "client/proto_json.h"
#include "client/status_table.h"

namespace omnistage {
namespace {

// One GetPipelineStatus call, printed; false when it failed (said on stderr).
bool PrintOnce(v1::Orchestrator::StubInterface& stub, const StatusOptions& options) {
  grpc::ClientContext context;
  options.prepare(&context);
  v1::PipelineStatusRequest request;
  request.set_cluster(options.cluster);
  v1::PipelineStatus response;
  const grpc::Status status = stub.GetPipelineStatus(&context, request, &response);
  if (!status.ok()) {
    std::cerr << "omni: status failed: " << Describe(status) << "\n";
    return false;
  }
  std::cout << (options.json ? ToJson(response) : FormatStatusTable(response));
  std::cout.flush();
  return true;
}

}  // namespace

int RunStatus(v1::Orchestrator::StubInterface& stub, const StatusOptions& options,
              const std::atomic<bool>& interrupted) {
  if (!options.watch) return PrintOnce(stub, options) ? kOk : kError;
  const bool terminal = isatty(STDOUT_FILENO) == 1;
  const absl::Duration interval = absl::Seconds(options.interval_s);
  while (!interrupted.load()) {
    const std::string now = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
    if (terminal) {
      // Home, clear the screen, then a heading saying what this is.
      std::cout << "\033[H\033[2J"
                << absl::StrCat("omni status every ", options.interval_s, " s (Ctrl-C stops)  ",
                                now, "\n\n");
    } else {
      std::cout << "--- " << now << "\n";
    }
    std::cout.flush();
    PrintOnce(stub, options);
    const absl::Time next = absl::Now() + interval;
    while (!interrupted.load() && absl::Now() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return kOk;
}

}  // namespace omnistage
