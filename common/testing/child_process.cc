#include "common/testing/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace omnistage {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    // Die with the test, so nothing outlives it even if the test is killed.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, fds[0]));
}

ChildProcess::~ChildProcess() {
  if (!exit_code_.has_value()) {
    kill(pid_, SIGKILL);
    int status;
    waitpid(pid_, &status, 0);
  }
  close(stdout_fd_);
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(const std::string& text,
                                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    size_t end;
    while ((end = output_.find('\n', scanned_)) != std::string::npos) {
      std::string line = output_.substr(scanned_, end - scanned_);
      scanned_ = end + 1;
      if (line.find(text) != std::string::npos) return line;
    }
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) {
      return absl::DeadlineExceededError(absl::StrCat("no line with '", text, "' on stdout"));
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left_ms)) <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(stdout_fd_, buffer, sizeof(buffer));
    if (n <= 0) return absl::UnavailableError("stdout closed: the process exited");
    output_.append(buffer, n);
  }
}

void ChildProcess::Signal(int signal) {
  if (!exit_code_.has_value()) kill(pid_, signal);
}

std::optional<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!exit_code_.has_value()) {
    int status;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return exit_code_;
}

ListeningLine ListeningLineIn(const std::string& output) {
  absl::StatusOr<ListeningLine> line = FindListeningLine(output);
  return line.ok() ? *std::move(line) : ListeningLine{};
}

}  // namespace omnistage
