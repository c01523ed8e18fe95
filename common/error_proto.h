// Conversion between absl::Status and the wire's v1::Error, which also says where
// an error arose (stage, replica and the replica's instance id; -1 / empty when
// none was involved). Every v1::Error either service builds comes from here.
//
//   *terminal.mutable_error() = ErrorProto(absl::UnavailableError("..."), stage, replica, id);
//   absl::Status status = StatusFromErrorProto(rejected.error());
#ifndef OMNISTAGE_COMMON_ERROR_PROTO_H_
#define OMNISTAGE_COMMON_ERROR_PROTO_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "protos/common.pb.h"

namespace omnistage {

// `status` (not OK) as a v1::Error. A field path the status carries
// (field_error.h) travels in `field`, a retry hint (retry_hint.h) in
// `retry_after_ms`; StatusFromErrorProto restores both.
v1::Error ErrorProto(const absl::Status& status, int stage = -1, int replica = -1,
                     absl::string_view instance_id = "");

// The status a v1::Error describes (code 0 or unknown codes read as INTERNAL, so
// an error never turns into OK), with its field path.
absl::Status StatusFromErrorProto(const v1::Error& error);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_ERROR_PROTO_H_
