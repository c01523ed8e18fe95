// FinishWith: the callback that ends a callback-API unary call with a result's
// value or its error (the services' calls answer from the event loop).
#ifndef OMNISTAGE_COMMON_GRPC_UNARY_FINISH_H_
#define OMNISTAGE_COMMON_GRPC_UNARY_FINISH_H_

#include <functional>
#include <utility>

#include "absl/status/statusor.h"
#include "common/grpc/grpc_util.h"
#include "grpcpp/grpcpp.h"

namespace omnistage {

template <typename Response>
std::function<void(absl::StatusOr<Response>)> FinishWith(grpc::ServerUnaryReactor* reactor,
                                                         Response* response) {
  return [reactor, response](absl::StatusOr<Response> result) {
    if (!result.ok()) {
      reactor->Finish(ToGrpcStatus(result.status()));
      return;
    }
    *response = *std::move(result);
    reactor->Finish(grpc::Status::OK);
  };
}

// The call's deadline (InfiniteFuture when it has none).
inline absl::Time DeadlineOf(const grpc::CallbackServerContext& context) {
  return context.deadline() == std::chrono::system_clock::time_point::max()
             ? absl::InfiniteFuture()
             : absl::FromChrono(context.deadline());
}

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_GRPC_UNARY_FINISH_H_
