#include "tests/bench/worker_session_bench.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "stage_worker/engines/registry.h"
#include "stage_worker/testing/worker_test_client.h"
#include "stage_worker/worker.h"
#include "stage_worker/worker_service.h"

namespace omnistage {

SessionRun RunThroughWorker(const std::string& engine,
                            const std::map<std::string, std::string>& params, int batch,
                            uint32_t tokens) {
  WorkerOptions options;
  options.engine_name = engine;
  Worker worker(options, *CreateEngine(engine, params));
  auto server = *WorkerServer::Start(WorkerServerOptions(), &worker);
  worker.Start();
  WorkerTestClient client(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port()),
                                              grpc::InsecureChannelCredentials()));
  (void)client.Connect();
  SessionRun run;
  const uint64_t steps_before = worker.steps();
  const absl::Time start = absl::Now();
  for (int i = 0; i < batch; ++i) {
    client.Add(absl::StrCat("r", i), absl::StrCat("prompt ", i), tokens);
  }
  int finished = 0;
  while (finished < batch) {
    std::optional<v1::WorkerEvent> event = client.Next(absl::Seconds(60));
    if (!event.has_value()) break;
    ++run.messages;
    for (const v1::RequestOutput& out : event->step().outputs()) {
      for (const v1::Payload& p : out.payloads()) run.tokens += p.tokens().ids_size();
      finished += out.finished() ? 1 : 0;
    }
  }
  run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  run.steps = worker.steps() - steps_before;
  worker.RequestShutdown();
  (void)worker.Wait();
  server->Shutdown(absl::Seconds(1));
  return run;
}

}  // namespace omnistage
