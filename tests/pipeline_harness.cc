#include "tests/pipeline_harness.h"

#include <algorithm>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace omnistage {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr && *dir != '\0' ? dir : "/tmp";
}

int64_t Field(const google::protobuf::Struct& fields, const std::string& name) {
  auto it = fields.fields().find(name);
  return it == fields.fields().end() ? -1 : static_cast<int64_t>(it->second.number_value());
}

}  // namespace

// ---- Processes ------------------------------------------------------------------------

PipelineHarness::Worker PipelineHarness::NewWorker(int stage, int replica,
                                                   const std::string& host) const {
  const StageSpec& spec = spec_.stages[stage];
  Worker worker;
  worker.stage = stage;
  worker.host = host;
  worker.flags = {absl::StrCat("--stage_id=", stage), absl::StrCat("--engine=", spec.engine)};
  if (!spec.engine_params.empty()) {
    worker.flags.push_back(absl::StrCat("--engine_params=", spec.engine_params));
  }
  worker.flags.insert(worker.flags.end(), spec.worker_flags.begin(), spec.worker_flags.end());
  if (replica < static_cast<int>(spec.replica_flags.size())) {
    worker.flags.insert(worker.flags.end(), spec.replica_flags[replica].begin(),
                        spec.replica_flags[replica].end());
  }
  return worker;
}

absl::StatusOr<std::unique_ptr<PipelineHarness>> PipelineHarness::Start(PipelineSpec spec) {
  std::unique_ptr<PipelineHarness> h(new PipelineHarness(std::move(spec)));
  h->workers_.resize(h->spec_.stages.size());
  for (size_t s = 0; s < h->spec_.stages.size(); ++s) {
    const StageSpec& stage = h->spec_.stages[s];
    for (int r = 0; r < stage.replicas; ++r) {
      const std::string host =
          r < static_cast<int>(stage.hosts.size()) ? stage.hosts[r] : "127.0.0.1";
      // A discovered stage's replicas share one port, like the pods of a Service.
      const int port = !stage.dns_name.empty() && r > 0 ? h->workers_[s][0].port : 0;
      Worker& worker = h->workers_[s].emplace_back(h->NewWorker(static_cast<int>(s), r, host));
      if (absl::Status status = SpawnWorker(worker, port); !status.ok()) {
        return absl::Status(status.code(),
                            absl::StrCat("stage ", s, " replica ", r, ": ", status.message()));
      }
    }
  }
  static std::atomic<int> next_config{0};
  h->config_path_ = absl::StrCat(TempDir(), "/pipeline_", getpid(), "_", next_config++, ".yaml");
  std::vector<std::vector<std::string>> addresses(h->workers_.size());
  for (size_t s = 0; s < h->workers_.size(); ++s) {
    for (size_t r = 0; r < h->workers_[s].size(); ++r) {
      addresses[s].push_back(h->worker_address(static_cast<int>(s), static_cast<int>(r)));
    }
  }
  {
    std::ofstream out(h->config_path_);
    out << PipelineConfigYaml(h->spec_, addresses);
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", h->config_path_));
  }
  if (absl::Status status = h->StartOrchestrator(); !status.ok()) return status;
  return h;
}

PipelineHarness::~PipelineHarness() {
  orchestrator_.reset();
  workers_.clear();
}

absl::Status PipelineHarness::SpawnWorker(Worker& worker, int port) {
  std::vector<std::string> argv = {kStageWorkerBinary,
                                   absl::StrCat("--listen=", worker.host, ":", port)};
  argv.insert(argv.end(), worker.flags.begin(), worker.flags.end());
  // A fixed port can be briefly unavailable right after the previous process
  // died; try again for a while.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::Status last;
  do {
    absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(argv);
    if (!process.ok()) return process.status();
    absl::StatusOr<std::string> line =
        (*process)->WaitForLine("listening port=", absl::Seconds(20));
    const ListeningLine listening = ListeningLineIn(line.ok() ? *line : "");
    if (listening.port > 0) {
      worker.port = listening.port;
      worker.metrics_port = listening.Number("metrics_port");
      worker.instance = listening.Field("instance");
      worker.process = *std::move(process);
      return absl::OkStatus();
    }
    last = line.ok() ? absl::InternalError(absl::StrCat("bad port line: ", *line)) : line.status();
    if (port == 0) break;
    absl::SleepFor(absl::Milliseconds(100));
  } while (absl::Now() < deadline);
  return absl::Status(last.code(), absl::StrCat("worker did not start: ", last.message()));
}

std::string PipelineHarness::worker_address(int stage, int replica) const {
  return absl::StrCat(workers_[stage][replica].host, ":", workers_[stage][replica].port);
}

pid_t PipelineHarness::worker_pid(int stage, int replica) const {
  const Worker& worker = workers_[stage][replica];
  return worker.process == nullptr ? 0 : worker.process->pid();
}

void PipelineHarness::KillWorker(int stage, int replica) {
  Worker& worker = workers_[stage][replica];
  if (worker.process == nullptr) return;
  worker.process->Signal(SIGKILL);
  worker.process->Wait(absl::Seconds(10));
}

absl::StatusOr<int> PipelineHarness::AddWorker(int stage, const std::string& host) {
  const int replica = static_cast<int>(workers_[stage].size());
  Worker worker = NewWorker(stage, replica, host);
  if (absl::Status status = SpawnWorker(worker, workers_[stage].at(0).port); !status.ok()) {
    return status;
  }
  workers_[stage].push_back(std::move(worker));
  return replica;
}

absl::Status PipelineHarness::RestartWorker(int stage, int replica) {
  Worker& worker = workers_[stage][replica];
  worker.process.reset();  // Kills and reaps it if it still runs.
  return SpawnWorker(worker, worker.port);
}

absl::Status PipelineHarness::StartOrchestrator() {
  orchestrator_.reset();
  std::vector<std::string> argv = {kOrchestratorBinary, absl::StrCat("--config=", config_path_),
                                   "--listen=127.0.0.1:0",
                                   absl::StrCat("--stage_worker=", kStageWorkerBinary)};
  if (!spec_.dns_server.empty()) argv.push_back(absl::StrCat("--dns_server=", spec_.dns_server));
  argv.insert(argv.end(), spec_.orchestrator_flags.begin(), spec_.orchestrator_flags.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(argv);
  if (!process.ok()) return process.status();
  orchestrator_ = *std::move(process);
  absl::StatusOr<std::string> line =
      orchestrator_->WaitForLine("listening port=", absl::Seconds(30));
  if (!line.ok()) {
    return absl::Status(line.status().code(),
                        absl::StrCat("orchestrator did not start: ", line.status().message()));
  }
  const ListeningLine listening = ListeningLineIn(*line);
  orchestrator_port_ = listening.port;
  orchestrator_metrics_port_ = listening.Number("metrics_port");
  if (orchestrator_port_ <= 0) return absl::InternalError(absl::StrCat("bad port line: ", *line));
  stub_ = v1::Orchestrator::NewStub(NewChannel());
  return WaitAllAlive(absl::Seconds(30), /*listed_as_specified=*/true);
}

std::shared_ptr<grpc::Channel> PipelineHarness::NewChannel(const TlsFiles& tls) const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // Audio responses can be large.
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", orchestrator_port_),
                                   ChannelCredentialsFor(tls), args);
}

absl::Status PipelineHarness::WaitAllAlive(absl::Duration timeout, bool listed_as_specified) {
  absl::Status last = absl::DeadlineExceededError("no status yet");
  const bool alive = Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> status = Status();
        if (!status.ok()) {
          last = status.status();
          return false;
        }
        // A stage found through DNS lists no replica until its first lookup is
        // applied: "every listed replica alive" would hold before that.
        for (size_t s = 0; listed_as_specified && s < spec_.stages.size(); ++s) {
          const int listed = s < static_cast<size_t>(status->stages_size())
                                 ? status->stages(s).replicas_size()
                                 : 0;
          if (listed < spec_.stages[s].replicas) {
            last = absl::UnavailableError(absl::StrCat("stage ", s, " lists ", listed, " of its ",
                                                       spec_.stages[s].replicas, " replicas"));
            return false;
          }
        }
        for (const v1::StageStatus& stage : status->stages()) {
          for (const v1::ReplicaStatus& replica : stage.replicas()) {
            if (!replica.alive()) {
              last = absl::UnavailableError(absl::StrCat("stage ", stage.stage_id(), " replica ",
                                                         replica.replica(),
                                                         " is not alive: ", replica.last_error()));
              return false;
            }
          }
        }
        return true;
      },
      timeout, absl::Milliseconds(50));
  if (alive) return absl::OkStatus();
  return absl::Status(last.code(), absl::StrCat("not every replica came alive: ", last.message()));
}

// ---- Client -----------------------------------------------------------------------------

GenerateResult PipelineHarness::Generate(const v1::GenerateRequest& request,
                                         absl::Duration timeout) {
  GenerateCall call(stub_, request, timeout + absl::Seconds(5), spec_.token);
  return call.Wait(timeout);
}

std::vector<GenerateResult> PipelineHarness::GenerateAll(
    const std::vector<v1::GenerateRequest>& requests, absl::Duration timeout) {
  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (const v1::GenerateRequest& request : requests) {
    calls.push_back(StartGenerate(request, timeout + absl::Seconds(5)));
  }
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<GenerateResult> results;
  for (auto& call : calls) results.push_back(call->Wait(deadline - absl::Now()));
  return results;
}

std::unique_ptr<GenerateCall> PipelineHarness::StartGenerate(const v1::GenerateRequest& request,
                                                             absl::Duration deadline) {
  return std::make_unique<GenerateCall>(stub_, request, deadline, spec_.token);
}

void PipelineHarness::Authorize(grpc::ClientContext& context) const {
  if (!spec_.token.empty()) context.AddMetadata("authorization", "Bearer " + spec_.token);
}

absl::StatusOr<v1::AbortResponse> PipelineHarness::Abort(const std::vector<std::string>& ids,
                                                         absl::Duration deadline) {
  v1::AbortRequest request;
  for (const std::string& id : ids) request.add_request_ids(id);
  v1::AbortResponse response;
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(deadline));
  Authorize(context);
  grpc::Status status = stub_->Abort(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  return response;
}

absl::StatusOr<v1::PipelineStatus> PipelineHarness::Status() {
  v1::PipelineStatus response;
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(absl::Seconds(10)));
  Authorize(context);
  grpc::Status status = stub_->GetPipelineStatus(&context, v1::PipelineStatusRequest(), &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  return response;
}

std::vector<absl::StatusOr<WorkerStats>> PipelineHarness::Stats(int stage) {
  std::vector<absl::StatusOr<WorkerStats>> stats(
      replicas(stage), absl::UnavailableError("no answer from the orchestrator"));
  v1::StageUtilityRequest request;
  request.set_stage_id(stage);
  request.set_name("stats");
  v1::StageUtilityResponse response;
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(absl::Seconds(10)));
  Authorize(context);
  grpc::Status status = stub_->CallStageUtility(&context, request, &response);
  if (!status.ok()) {
    for (auto& s : stats) {
      s = absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
    }
    return stats;
  }
  // One per replica the orchestrator lists, in its order.
  stats.clear();
  for (const v1::ReplicaUtilityResult& result : response.results()) {
    if (result.has_error()) {
      stats.push_back(absl::Status(static_cast<absl::StatusCode>(result.error().code()),
                                   result.error().message()));
      continue;
    }
    const google::protobuf::Struct& fields = result.value().struct_value();
    WorkerStats s;
    s.running = Field(fields, "running");
    s.waiting = Field(fields, "waiting");
    s.steps = Field(fields, "steps");
    s.capacity = Field(fields, "capacity");
    s.abort_calls = Field(fields, "abort_calls");
    s.prefix_cache_hit_tokens = std::max<int64_t>(0, Field(fields, "prefix_cache_hit_tokens"));
    s.prefix_cache_miss_tokens = std::max<int64_t>(0, Field(fields, "prefix_cache_miss_tokens"));
    s.prefix_cache_blocks = std::max<int64_t>(0, Field(fields, "prefix_cache_blocks"));
    stats.push_back(s);
  }
  return stats;
}

absl::StatusOr<std::vector<std::vector<WorkerStats>>> PipelineHarness::AllStats() {
  std::vector<std::vector<WorkerStats>> all(workers_.size());
  for (size_t s = 0; s < workers_.size(); ++s) {
    for (absl::StatusOr<WorkerStats>& stats : Stats(static_cast<int>(s))) {
      if (!stats.ok()) return stats.status();
      all[s].push_back(*stats);
    }
  }
  return all;
}

}  // namespace omnistage
