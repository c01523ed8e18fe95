// Abort and kill -9 scenarios, each against an orchestrator of its own, and the
// long-request pipelines the scenarios share.
#include <signal.h>

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/bench/baseline_server.h"
#include "tests/bench/scenarios.h"

namespace omnistage {
namespace bench {
namespace {

RequestFactory LongRequests(const std::string& prefix) {
  return [prefix](int, int64_t seq) {
    return OrchestratorRequest(absl::StrCat(prefix, seq), 1, kLongTokens, seq);
  };
}

int CountReason(const std::vector<StreamView>& views, v1::FinishReason reason) {
  int n = 0;
  for (const StreamView& v : views) n += v.finish_reason == reason ? 1 : 0;
  return n;
}

// One output from the bare server: call start -> that output, in us.
absl::StatusOr<double> RoundTripUs(v1::Orchestrator::Stub& baseline, int n) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  const int64_t start = NowNs();
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      baseline.Generate(&context, BaselineRequest(absl::StrCat("ping-", n), 1, 0));
  v1::GenerateResponse response;
  if (!reader->Read(&response)) {
    return absl::UnavailableError(
        absl::StrCat("the baseline server: ", reader->Finish().error_message()));
  }
  const int64_t first = NowNs();
  while (reader->Read(&response)) {
  }
  if (grpc::Status status = reader->Finish(); !status.ok()) {
    return absl::UnavailableError(absl::StrCat("the baseline server: ", status.error_message()));
  }
  return (first - start) / 1e3;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Pipeline>> OpenPipeline(BenchEnv& env, const PipelineShape& shape) {
  absl::StatusOr<Server> server = StartOrchestrator(env.binaries, env.dir, shape);
  if (!server.ok()) return server.status();
  auto pipeline = std::make_unique<Pipeline>();
  pipeline->server = std::move(*server);
  std::shared_ptr<grpc::Channel> channel =
      ConnectLoopback(pipeline->server.port, absl::Seconds(10));
  if (channel == nullptr) return absl::UnavailableError("cannot connect to the orchestrator");
  pipeline->stub = std::make_shared<v1::Orchestrator::Stub>(channel);
  if (!WaitPipelineAlive(pipeline->stub.get(), absl::Seconds(20))) {
    return absl::UnavailableError("the pipeline's replicas were not all alive within 20 s");
  }
  return pipeline;
}

std::unique_ptr<StreamGroup> StartLong(const Pipeline& pipeline, int streams,
                                       const std::string& prefix) {
  LoadOptions options;
  options.streams = streams;
  options.make_request = LongRequests(prefix);
  auto group = std::make_unique<StreamGroup>(pipeline.stub, options);
  group->Start();
  return group;
}

AbortFigures RunAbort(const BenchOptions& options, BenchEnv& env, int in_flight) {
  std::fprintf(stderr, "abort: %d aborts at %d in flight\n", options.aborts, in_flight);
  AbortFigures figures;
  PipelineShape shape;
  shape.step_time_us = 1000;
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline = OpenPipeline(env, shape);
  if (!pipeline.ok()) {
    figures.error = std::string(pipeline.status().message());
    return figures;
  }
  // Each slot starts a new long request when its request ends, so every abort
  // meets `in_flight` requests; the group is cancelled at the end.
  LoadOptions load;
  load.streams = in_flight;
  load.run_for = absl::Hours(1);
  load.make_request = LongRequests("abort-");
  StreamGroup group((*pipeline)->stub, load);
  group.Start();
  figures.in_flight = in_flight;
  std::shared_ptr<grpc::Channel> baseline_channel =
      ConnectLoopback(env.baseline.port, absl::Seconds(10));
  if (baseline_channel == nullptr) {
    figures.error = "cannot connect to the baseline server";
    return figures;
  }
  auto baseline = std::make_unique<v1::Orchestrator::Stub>(baseline_channel);
  // One at a time, the others streaming: each abort is measured alone.
  for (int n = 0; n < options.aborts; ++n) {
    // The oldest stream that is streaming; wait for one if none is (a
    // replacement has not produced its first token yet).
    size_t victim = 0;
    const bool found = group.WaitUntil(
        [&victim](const std::vector<StreamView>& views) {
          for (size_t i = 0; i < views.size(); ++i) {
            if (views[i].first_token_ns != 0 && views[i].terminal_ns == 0 && !views[i].done) {
              victim = i;
              return true;
            }
          }
          return false;
        },
        absl::Seconds(30));
    if (!found) {
      figures.error = "no streaming request to abort within 30 s";
      break;
    }
    const std::string id = group.Views()[victim].request_id;
    v1::AbortRequest request;
    request.add_request_ids(id);
    v1::AbortResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    const int64_t sent = NowNs();
    const grpc::Status status = (*pipeline)->stub->Abort(&context, request, &response);
    const int64_t answered = NowNs();
    if (!status.ok()) {
      figures.error = absl::StrCat("Abort(", id, "): ", status.error_message());
      break;
    }
    if (!group.WaitTerminal(victim, absl::Seconds(10))) {
      figures.error = absl::StrCat("no terminal for ", id, " within 10 s of its abort");
      break;
    }
    const StreamView view = group.Views()[victim];
    if (view.finish_reason != v1::FINISH_REASON_ABORT) {
      figures.error = absl::StrCat(id, " ended with finish_reason ", view.finish_reason);
      break;
    }
    ++figures.aborted;
    figures.rpc.us.push_back((answered - sent) / 1e3);
    figures.terminal.us.push_back((view.terminal_ns - sent) / 1e3);
    absl::StatusOr<double> first = RoundTripUs(*baseline, 2 * n);
    absl::StatusOr<double> second = RoundTripUs(*baseline, 2 * n + 1);
    if (!first.ok() || !second.ok()) {
      figures.error = std::string((first.ok() ? second : first).status().message());
      break;
    }
    figures.round_trip.us.push_back(*first);
    figures.round_trip.us.push_back(*second);
    figures.two_round_trips.us.push_back(*first + *second);
  }
  return figures;
}

namespace {

// One kill -9 of one of the two workers with `streams` long requests in flight.
absl::Status KillOnce(const Pipeline& pipeline, int streams, int round, KillRound& result,
                      Latencies& latencies) {
  if (!WaitPipelineAlive(pipeline.stub.get(), absl::Seconds(20))) {
    return absl::UnavailableError("the two replicas were not both alive within 20 s");
  }
  std::unique_ptr<StreamGroup> group =
      StartLong(pipeline, streams, absl::StrCat("kill", round, "-"));
  if (!group->WaitAllHaveTokens(absl::Seconds(30))) {
    return absl::DeadlineExceededError("not every request produced a token within 30 s");
  }
  grpc::ClientContext context;
  v1::PipelineStatus status;
  if (pipeline.stub->GetPipelineStatus(&context, {}, &status).ok()) {
    for (const v1::ReplicaStatus& r : status.stages(0).replicas()) {
      result.bound_before.push_back(r.bound_requests());
    }
  }
  const std::vector<pid_t> workers = ChildPids(pipeline.server.pid());
  if (workers.size() != 2 || result.bound_before.size() != 2) {
    return absl::InternalError(absl::StrCat("expected 2 workers and 2 replicas, found ",
                                            workers.size(), " and ", result.bound_before.size()));
  }
  const int64_t killed_at = NowNs();
  kill(workers[round % 2], SIGKILL);
  // Every request of the killed replica (the one the first error names) must fail.
  const std::vector<int> bound = result.bound_before;
  const bool all_failed = group->WaitUntil(
      [&bound](const std::vector<StreamView>& views) {
        int replica = -1;
        for (const StreamView& v : views) {
          if (v.finish_reason == v1::FINISH_REASON_ERROR) replica = v.error_replica;
        }
        if (replica < 0 || replica >= 2) return false;
        return CountReason(views, v1::FINISH_REASON_ERROR) >= bound[replica];
      },
      absl::Seconds(10));
  absl::SleepFor(absl::Milliseconds(200));  // Would anything else fail? It must not.
  for (const StreamView& v : group->Views()) {
    if (v.finish_reason == v1::FINISH_REASON_ERROR) {
      ++result.failed;
      result.killed_replica = v.error_replica;
      latencies.us.push_back((v.terminal_ns - killed_at) / 1e3);
    } else if (v.terminal_ns == 0 && !v.done) {
      ++result.unaffected_running;
    }
  }
  if (!all_failed) {
    return absl::DeadlineExceededError("not every request of the killed replica failed in 10 s");
  }
  return absl::OkStatus();
}

}  // namespace

KillFigures RunKill(const BenchOptions& options, BenchEnv& env) {
  std::fprintf(stderr, "kill -9: %d rounds, %d in flight on 2 replicas\n", options.kill_rounds,
               options.kill_streams);
  KillFigures figures;
  figures.in_flight = options.kill_streams;
  PipelineShape shape;
  shape.replicas = 2;
  shape.step_time_us = 1000;
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline = OpenPipeline(env, shape);
  if (!pipeline.ok()) {
    figures.error = std::string(pipeline.status().message());
    return figures;
  }
  // The orchestrator restarts a killed worker; each round waits for it.
  for (int round = 0; round < options.kill_rounds; ++round) {
    absl::Status s = KillOnce(**pipeline, options.kill_streams, round,
                              figures.rounds.emplace_back(), figures.terminal);
    if (!s.ok()) {
      figures.error = absl::StrCat("round ", round, ": ", s.message());
      break;
    }
  }
  return figures;
}

}  // namespace bench
}  // namespace omnistage
