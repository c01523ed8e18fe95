#include "client/duplex_call.h"

#include <chrono>
#include <memory>
#include <thread>
#include <utility>

namespace omnistage {

grpc::Status RunDuplex(v1::Orchestrator::Stub& stub, grpc::ClientContext* context,
                       v1::GenerateRequest request, const FeedInput& feed,
                       const std::function<void(const v1::GenerateResponse&)>& on_response,
                       const std::atomic<bool>& interrupted) {
  std::unique_ptr<grpc::ClientReaderWriter<v1::GenerateInput, v1::GenerateResponse>> stream =
      stub.GenerateDuplex(context);
  v1::GenerateInput first;
  *first.mutable_request() = std::move(request);
  // Set when the responses end: the feeder stops.
  std::atomic<bool> done{false};
  std::thread feeder;
  // A refused first message shows in the call's status below.
  if (stream->Write(first)) {
    feeder = std::thread([&] {
      feed([&](const v1::GenerateInput& message) { return stream->Write(message); }, done);
      if (!done.load()) stream->WritesDone();
    });
  }
  std::atomic<bool> streaming{true};
  std::thread watcher([&] {
    while (streaming.load() && !interrupted.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (interrupted.load()) context->TryCancel();
  });
  v1::GenerateResponse response;
  while (stream->Read(&response)) on_response(response);
  // The feeder stops before the call is finished under it.
  done = true;
  if (feeder.joinable()) feeder.join();
  const grpc::Status status = stream->Finish();
  streaming = false;
  watcher.join();
  return status;
}

}  // namespace omnistage
