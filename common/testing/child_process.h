// ChildProcess: a process started by a test, always stopped by PID, even when the
// test fails (the destructor sends SIGKILL and reaps it).
//
//   auto worker = ChildProcess::Start({"stage_worker/stage_worker", "--engine=sim_llm"});
//   std::string line = *(*worker)->WaitForLine("listening port=", absl::Seconds(10));
//   (*worker)->Signal(SIGTERM);
//   EXPECT_EQ((*worker)->Wait(absl::Seconds(5)), 0);
#ifndef OMNISTAGE_COMMON_TESTING_CHILD_PROCESS_H_
#define OMNISTAGE_COMMON_TESTING_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/listening_line.h"

namespace omnistage {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with its stdout on a pipe; stderr is inherited. The
  // process is killed when the *thread* that started it ends (PR_SET_PDEATHSIG),
  // so start long-lived processes from a thread that outlives them.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv);
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Reads stdout until a line containing `text` and returns that line.
  absl::StatusOr<std::string> WaitForLine(const std::string& text, absl::Duration timeout);
  // Everything read from stdout so far.
  const std::string& output() const { return output_; }
  void Signal(int signal);
  // The exit code (or 128 + signal), or nullopt if still running after `timeout`.
  std::optional<int> Wait(absl::Duration timeout);

 private:
  ChildProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}

  const pid_t pid_;
  const int stdout_fd_;
  std::string output_;
  size_t scanned_ = 0;
  std::optional<int> exit_code_;
};

// The listening line (common/listening_line.h) in `output`, a line or a
// process's output; one with port 0 and no fields when there is none.
ListeningLine ListeningLineIn(const std::string& output);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TESTING_CHILD_PROCESS_H_
