#include "tests/bench/targets.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/bench/baseline_server.h"

namespace omnistage {
namespace bench {

RequestFactory TargetRequests(const Target& target, int tokens, int64_t step_time_us, bool stamp) {
  if (target.stages == 0) {
    return [tokens, step_time_us, stamp](int, int64_t) {
      return BaselineRequest("", tokens, step_time_us, stamp);
    };
  }
  const int stages = target.stages;
  return [stages, tokens](int, int64_t seq) {
    return OrchestratorRequest("", stages, tokens, seq);
  };
}

bool TracedRow(const std::string& row) {
  return row == "trace-0.01" || row == "trace-1" || row == "trace-down";
}

std::unique_ptr<Target> OpenTarget(const std::string& row, int64_t step_time_us, int tokens,
                                   bool stamp, BenchEnv& env) {
  auto target = std::make_unique<Target>();
  auto relay = env.relays.find(row);
  if (relay != env.relays.end()) {
    target->port = relay->second.port;
    target->make_request = TargetRequests(*target, tokens, step_time_us, stamp);
    return target;
  }
  if (row == "baseline" || row == "nginx" || row == "haproxy") {
    target->port = row == "baseline" ? env.baseline.port
                   : row == "nginx"  ? env.nginx.port
                                     : env.haproxy.port;
    if (row == "nginx" && env.nginx.process == nullptr) target->error = env.nginx_note;
    if (row == "haproxy" && env.haproxy.process == nullptr) target->error = env.haproxy_note;
    target->make_request = TargetRequests(*target, tokens, step_time_us, stamp);
    return target;
  }
  if (row != "orch1" && row != "orch3" && !TracedRow(row)) {
    target->error = absl::StrCat("unknown row '", row, "'");
    return target;
  }
  PipelineShape shape;
  shape.stages = row == "orch3" ? 3 : 1;
  if (TracedRow(row)) {
    std::string endpoint = env.otlp_endpoint;
    if (row == "trace-down") {
      // A port nothing listens on.
      absl::StatusOr<int> closed = PickFreePort();
      if (!closed.ok()) {
        target->error = absl::StrCat("no free port: ", closed.status().message());
        return target;
      }
      endpoint = absl::StrCat("http://127.0.0.1:", *closed);
    }
    shape.orchestrator_flags = {
        "--otlp_traces_endpoint=" + endpoint, "--otlp_protocol=grpc",
        "--trace_sampler=parentbased_traceidratio",
        row == "trace-0.01" ? "--trace_sampler_arg=0.01" : "--trace_sampler_arg=1",
        "--metrics_listen=127.0.0.1:0"};
  }
  shape.step_time_us = step_time_us;
  shape.stamp_outputs = stamp;
  absl::StatusOr<Server> server = StartOrchestrator(env.binaries, env.dir, shape);
  if (!server.ok()) {
    target->error = absl::StrCat("orchestrator did not start: ", server.status().message());
    return target;
  }
  target->orchestrator = std::move(*server);
  target->stages = shape.stages;
  target->port = target->orchestrator.port;
  target->make_request = TargetRequests(*target, tokens, step_time_us, stamp);
  return target;
}

std::vector<pid_t> ServingPids(const std::string& row, const Target& target, const BenchEnv& env) {
  if (row == "baseline") return {env.baseline.pid()};
  if (row == "nginx") return {env.nginx.pid(), env.baseline.pid()};
  if (row == "haproxy") return {env.haproxy.pid(), env.baseline.pid()};
  auto relay = env.relays.find(row);
  if (relay != env.relays.end()) return {relay->second.pid(), env.baseline.pid()};
  std::vector<pid_t> pids = {target.orchestrator.pid()};
  for (pid_t worker : ChildPids(target.orchestrator.pid())) pids.push_back(worker);
  return pids;
}

ProcessCpu Cpu(const std::vector<pid_t>& pids) {
  ProcessCpu sum;
  for (pid_t pid : pids) {
    const ProcessCpu cpu = ReadProcessCpu(pid).value_or(ProcessCpu{});
    sum.sched_ns += cpu.sched_ns;
    sum.runs += cpu.runs;
  }
  return sum;
}

std::shared_ptr<v1::Orchestrator::Stub> Warm(Target& target) {
  std::shared_ptr<grpc::Channel> channel = ConnectLoopback(target.port, absl::Seconds(10));
  if (channel == nullptr) {
    target.error = absl::StrCat("cannot connect to 127.0.0.1:", target.port);
    return nullptr;
  }
  auto stub = std::make_shared<v1::Orchestrator::Stub>(channel);
  if (target.orchestrator.process != nullptr && !WaitPipelineAlive(stub.get(), absl::Seconds(20))) {
    target.error = "the pipeline's replicas were not all alive within 20 s";
    return nullptr;
  }
  const Figures warm =
      RunLoad(stub, 1, absl::ZeroDuration(), target.make_request, absl::Seconds(60));
  if (warm.failed != 0 || warm.requests == 0) {
    target.error = absl::StrCat("warm-up request failed: ", warm.error);
    return nullptr;
  }
  return stub;
}

}  // namespace bench
}  // namespace omnistage
