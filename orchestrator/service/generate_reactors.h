// The reactors of the two Generate calls: Generate (one request in, responses
// out) and GenerateDuplex (the request, then its input streaming in while the
// responses stream out; docs/clients.md, "Streamed input"). Each posts to the
// PipelineCore's event loop and writes through a ClientStream
// (client_stream.h). Each deletes itself when gRPC is done with it.
#ifndef OMNISTAGE_ORCHESTRATOR_SERVICE_GENERATE_REACTORS_H_
#define OMNISTAGE_ORCHESTRATOR_SERVICE_GENERATE_REACTORS_H_

#include "absl/status/status.h"
#include "common/event_loop.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/core/caller.h"
#include "orchestrator/core/pipeline_core.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

// `core` is used only on `loop`; both must outlive the call.
grpc::ServerWriteReactor<v1::GenerateResponse>* NewGenerateReactor(
    grpc::CallbackServerContext* context, PipelineCore* core, EventLoop* loop,
    const v1::GenerateRequest& request, Caller caller);
grpc::ServerBidiReactor<v1::GenerateInput, v1::GenerateResponse>* NewDuplexReactor(
    grpc::CallbackServerContext* context, PipelineCore* core, EventLoop* loop, Caller caller);

// Calls refused before they start (not authenticated): they end with `status`.
grpc::ServerWriteReactor<v1::GenerateResponse>* RefusedGenerate(const absl::Status& status);
grpc::ServerBidiReactor<v1::GenerateInput, v1::GenerateResponse>* RefusedDuplex(
    const absl::Status& status);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_SERVICE_GENERATE_REACTORS_H_
