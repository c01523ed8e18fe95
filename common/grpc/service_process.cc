#include "common/grpc/service_process.h"

#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <ctime>
#include <iostream>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/grpc_log.h"
#include "common/log.h"
#include "grpc/grpc.h"

namespace omnistage {

int StartRefused(absl::string_view program, absl::string_view why) {
  std::cerr << program << ": " << why << "\n";
  return kStartRefusedExitCode;
}

absl::Status SetUpLogging(const std::string& program, absl::string_view format,
                          absl::string_view level) {
  absl::StatusOr<LogOptions> logging = LogOptionsFromFlags(program, format, level);
  if (!logging.ok()) return logging.status();
  InitLogging(*logging);
  RouteGrpcLogs();
  return absl::OkStatus();
}

ServiceRuntime::ServiceRuntime(const char* argv0) {
  // Debian's Abseil is built with its mutex deadlock detector on: every lock
  // looks its mutex up in a graph of all of them (a few percent of the
  // orchestrator's CPU per request). The tests keep it; the services do not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::InitializeSymbolizer(argv0);
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
  grpc_init();
}

ServiceRuntime::~ServiceRuntime() { grpc_shutdown_blocking(); }

StopSignals::StopSignals(int also) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGINT);
  if (also != 0) sigaddset(&set_, also);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

int StopSignals::Wait() {
  int signal = 0;
  sigwait(&set_, &signal);
  return signal;
}

int StopSignals::WaitFor(absl::Duration timeout) {
  const timespec wait = absl::ToTimespec(std::max(timeout, absl::ZeroDuration()));
  const int signal = sigtimedwait(&set_, nullptr, &wait);
  return signal > 0 ? signal : 0;
}

void StopSignals::StopAtOnceOnNext() {
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
  sigdelset(&set_, SIGTERM);
  sigdelset(&set_, SIGINT);
}

std::string StopSignals::Name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return absl::StrCat("signal ", signal);
  }
}

}  // namespace omnistage
