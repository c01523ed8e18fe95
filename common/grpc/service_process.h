// What the main() of every service binary (orchestrator, stage_worker, gateway)
// does around its work, done one way: gRPC held for the whole run and shut down
// before the process exits, a crash reported with its stack, its logging set up
// from --log_format and --log_level (gRPC's own lines routed into it), a refused
// start reported in one line, and its stop signals taken by the main thread alone.
//
//   ServiceRuntime runtime(argv[0]);          // first: destroyed last
//   StopSignals signals;                      // before any thread: they inherit the mask
//   if (absl::Status s = SetUpLogging("gateway", format, level); !s.ok())
//     return StartRefused("gateway", s.message());
//   ... start, print the listening line ...
//   const int signal = signals.Wait();        // SIGTERM or SIGINT
//   signals.StopAtOnceOnNext();               // a second one ends the process
//   ... drain, stop ...
//
// Exit codes: 0 after a stop by signal, 2 for a refused start (bad flags, bad
// config, an address that cannot be listened on); each binary documents others.
#ifndef OMNISTAGE_COMMON_GRPC_SERVICE_PROCESS_H_
#define OMNISTAGE_COMMON_GRPC_SERVICE_PROCESS_H_

#include <signal.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace omnistage {

// The exit code of a start refused for its flags, config or environment.
inline constexpr int kStartRefusedExitCode = 2;

// Writes "<program>: <why>" on stderr; returns kStartRefusedExitCode.
int StartRefused(absl::string_view program, absl::string_view why);

// InitLogging with the --log_format and --log_level values, then gRPC's lines
// routed into it (common/grpc/grpc_log.h). INVALID_ARGUMENT naming the flag for a bad
// value; nothing is changed then.
absl::Status SetUpLogging(const std::string& program, absl::string_view format,
                          absl::string_view level);

// For main's whole run: gRPC initialized, and crashes (SIGSEGV, SIGABRT, ...)
// written to stderr with a symbolized stack before the process dies as it would
// have. Its destruction, after every gRPC object is gone, shuts gRPC down on the
// calling thread and waits for gRPC's own threads to end: returning from main
// while they still run would race them against the process's exit (a gRPC
// assertion, SIGABRT, seen on orchestrators stopped by SIGTERM). Construct it
// first in main. Not copyable.
class ServiceRuntime {
 public:
  explicit ServiceRuntime(const char* argv0);
  ~ServiceRuntime();
  ServiceRuntime(const ServiceRuntime&) = delete;
  ServiceRuntime& operator=(const ServiceRuntime&) = delete;
};

// SIGTERM and SIGINT (and `also`, when not 0) blocked in the calling thread and
// so in every thread started after it: they reach only Wait(). Construct it in
// main before starting any thread. Not thread-safe: the main thread's.
class StopSignals {
 public:
  explicit StopSignals(int also = 0);

  // Waits for one of the signals; returns it.
  int Wait();
  // Waits up to `timeout`; the signal, or 0 when none came.
  int WaitFor(absl::Duration timeout);
  // From now on SIGTERM and SIGINT take their default action: a second signal
  // ends the process at once (a drain in progress with it). `also` stays
  // blocked for Wait().
  void StopAtOnceOnNext();

  // "SIGTERM", "SIGINT" or "signal N".
  static std::string Name(int signal);

 private:
  sigset_t set_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_GRPC_SERVICE_PROCESS_H_
