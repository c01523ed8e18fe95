#include "orchestrator/replicas/local_workers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <climits>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/field_error.h"
#include "common/listening_line.h"
#include "common/log.h"

namespace omnistage {
namespace {

constexpr absl::Duration kStartTimeout = absl::Seconds(30);

// The worker's "refused field=<path> reason=<text>" line, as INVALID_ARGUMENT
// with that field path; OK if `output` holds no complete such line.
absl::Status RefusalIn(const std::string& output) {
  const size_t at = output.find("refused field=");
  if (at == std::string::npos) return absl::OkStatus();
  const size_t end = output.find('\n', at);
  if (end == std::string::npos) return absl::OkStatus();
  const std::string line = output.substr(at + 14, end - at - 14);
  const size_t reason = line.find(" reason=");
  if (reason == std::string::npos) return absl::InvalidArgumentError(line);
  return AtField(absl::InvalidArgumentError(line.substr(reason + 8)), line.substr(0, reason));
}

// Reads from `fd` until its listening line arrives; returns the port.
// A "refused field=" line is returned as the worker's refusal. Sets `*reaped`
// when the child exited (and was reaped) before either.
absl::StatusOr<int> ReadPort(int fd, pid_t pid, bool* reaped) {
  std::string output;
  const absl::Time deadline = absl::Now() + kStartTimeout;
  while (true) {
    if (absl::Status refused = RefusalIn(output); !refused.ok()) return refused;
    // Only a whole line: a partial one may still be missing digits.
    const size_t last_newline = output.rfind('\n');
    if (last_newline != std::string::npos) {
      absl::StatusOr<ListeningLine> line =
          FindListeningLine(absl::string_view(output).substr(0, last_newline + 1));
      if (line.ok()) return line->port;
      if (!absl::IsNotFound(line.status())) return absl::InternalError(line.status().message());
    }
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) return absl::DeadlineExceededError("did not report its port within 30 s");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buffer[1024];
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) {
      int status = 0;
      waitpid(pid, &status, 0);
      *reaped = true;
      return absl::UnavailableError(
          absl::StrCat("exited before serving (exit code ",
                       WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                       "); see its message above"));
    }
    output.append(buffer, n);
  }
}

}  // namespace

std::string DefaultWorkerBinary() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "stage_worker";
  const std::string path(self, n);
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "stage_worker";
  // A flat install (an image, /usr/local/bin): next to this program.
  const std::string beside = path.substr(0, slash) + "/stage_worker";
  if (access(beside.c_str(), X_OK) == 0) return beside;
  // A Bazel output tree: .../orchestrator/orchestrator -> .../stage_worker/stage_worker.
  const size_t parent = path.rfind('/', slash - 1);
  if (parent == std::string::npos) return beside;
  return path.substr(0, parent) + "/stage_worker/stage_worker";
}

absl::StatusOr<std::unique_ptr<LocalWorkers>> LocalWorkers::Start(
    const PipelineConfig& config, const std::string& worker_binary,
    const std::vector<std::string>& extra_args) {
  std::unique_ptr<LocalWorkers> local(new LocalWorkers());
  local->binary_ = worker_binary;
  std::vector<Worker> workers;
  for (const StageConfig& stage : config.stages) {
    local->addresses_.push_back(stage.addresses);
    if (stage.spawn_replicas == 0) continue;
    std::vector<std::string> params;
    for (const auto& [key, value] : stage.engine_params) params.push_back(key + "=" + value);
    for (int r = 0; r < stage.spawn_replicas; ++r) {
      Worker worker;
      worker.stage = stage.id;
      worker.replica = r;
      worker.args = {worker_binary, absl::StrCat("--stage_id=", stage.id),
                     absl::StrCat("--engine=", stage.engine),
                     absl::StrCat("--engine_params=", absl::StrJoin(params, ","))};
      worker.args.insert(worker.args.end(), extra_args.begin(), extra_args.end());
      worker.instance = absl::StrCat(stage.name, "-", r, "-", getpid());
      if (absl::Status s = Spawn(worker_binary, worker, 0); !s.ok()) {
        for (Worker& started : workers) {
          kill(started.pid, SIGKILL);
          waitpid(started.pid, nullptr, 0);
        }
        const std::string who = absl::StrCat("stage ", stage.id, " (", stage.name, ") replica ", r);
        if (!ErrorField(s).empty()) {
          // The worker refused what the config gave it: name that config field.
          return AtField(WithMessage(s, absl::StrCat(s.message(), " (", who, " refused to start)")),
                         absl::StrCat("stages[", stage.id, "]"));
        }
        return absl::Status(s.code(), absl::StrCat(who, ": ", s.message()));
      }
      local->addresses_.back().push_back(absl::StrCat("127.0.0.1:", worker.port));
      workers.push_back(std::move(worker));
    }
  }
  const size_t count = workers.size();
  {
    absl::MutexLock lock(&local->mu_);
    local->workers_ = std::move(workers);
  }
  for (size_t i = 0; i < count; ++i) {
    local->supervisors_.emplace_back([l = local.get(), i] { l->Supervise(i); });
  }
  return local;
}

absl::Status LocalWorkers::Spawn(const std::string& binary, Worker& worker, int port) {
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("no stage_worker binary at ", binary,
                                            " (build //stage_worker or pass --stage_worker)"));
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  std::vector<std::string> args = worker.args;
  args.push_back(absl::StrCat("--listen=127.0.0.1:", port));
  // Each start is a new incarnation with its own id, so a restart shows.
  args.push_back(absl::StrCat("--instance_id=", worker.instance, "-", ++worker.starts));
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // Never outlive the orchestrator...
    if (getppid() != parent) _exit(1);  // ...even if it died before prctl().
    // The orchestrator blocks these for its sigwait(); the worker needs them.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_UNBLOCK, &all, nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  bool reaped = false;
  absl::StatusOr<int> bound = ReadPort(fds[0], pid, &reaped);
  if (!bound.ok()) {
    if (!reaped) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    close(fds[0]);
    return bound.status();
  }
  if (worker.stdout_fd >= 0) close(worker.stdout_fd);
  worker.pid = pid;
  worker.port = *bound;
  // Kept open: the worker writes nothing more, and closing it could SIGPIPE it.
  worker.stdout_fd = fds[0];
  return absl::OkStatus();
}

void LocalWorkers::Supervise(size_t index) {
  absl::Duration backoff = absl::Milliseconds(200);
  while (true) {
    pid_t pid;
    {
      absl::MutexLock lock(&mu_);
      pid = workers_[index].pid;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    absl::MutexLock lock(&mu_);
    Worker& worker = workers_[index];
    worker.pid = 0;
    if (stopping_) return;
    LogWarning({"", worker.stage, worker.replica, ""},
               absl::StrCat("spawned worker (pid ", pid, ") exited with ",
                            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                            "; restarting it on port ", worker.port));
    // Restart on the same port so the orchestrator's reconnect finds it.
    while (true) {
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), backoff)) return;
      Worker copy = worker;
      mu_.Unlock();
      absl::Status spawned = Spawn(binary_, copy, copy.port);
      mu_.Lock();
      if (spawned.ok()) {
        worker = copy;
        backoff = absl::Milliseconds(200);
        LogInfo({"", worker.stage, worker.replica, ""},
                absl::StrCat("spawned worker restarted as ", worker.instance, " (pid ",
                             worker.pid, ")"));
        if (stopping_) kill(worker.pid, SIGKILL);  // Lost a race with Stop().
        break;
      }
      LogWarning({"", copy.stage, copy.replica, ""},
                 absl::StrCat("restart failed: ", spawned.message(), "; retrying in ",
                              absl::FormatDuration(std::min(backoff * 2, absl::Seconds(5)))));
      backoff = std::min(backoff * 2, absl::Seconds(5));
    }
  }
}

std::vector<pid_t> LocalWorkers::pids() const {
  absl::MutexLock lock(&mu_);
  std::vector<pid_t> pids;
  for (const Worker& w : workers_) {
    if (w.pid > 0) pids.push_back(w.pid);
  }
  return pids;
}

void LocalWorkers::Stop() {
  std::vector<pid_t> pids;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (const Worker& w : workers_) {
      if (w.pid > 0) pids.push_back(w.pid);
    }
  }
  for (pid_t pid : pids) kill(pid, SIGTERM);
  // Give them a moment to exit cleanly, then make sure.
  {
    absl::MutexLock lock(&mu_);
    auto all_gone = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::all_of(workers_.begin(), workers_.end(),
                         [](const Worker& w) { return w.pid == 0; });
    };
    mu_.AwaitWithTimeout(absl::Condition(&all_gone), absl::Seconds(5));
  }
  for (pid_t pid : this->pids()) kill(pid, SIGKILL);
  for (std::thread& supervisor : supervisors_) supervisor.join();
  absl::MutexLock lock(&mu_);
  for (Worker& w : workers_) {
    if (w.stdout_fd >= 0) close(w.stdout_fd);
    w.stdout_fd = -1;
  }
}

LocalWorkers::~LocalWorkers() { Stop(); }

}  // namespace omnistage
