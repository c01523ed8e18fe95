// Production stamps: a benchmark-only way to measure one-way latency on one
// machine. A producer (any engine with `stamp_outputs`, see
// stage_worker/engines/base/fault_injection.h; the benchmark's baseline server) adds to each output a raw payload holding the
// CLOCK_MONOTONIC time it produced it; a client on the same machine subtracts
// it from its own arrival time. CLOCK_MONOTONIC is shared by every process of
// one machine, so the difference is the one-way latency through whatever lies
// between (the orchestrator, a proxy).
//
//   v1::Payload stamp = StampPayload(MonotonicNowNs());
//   ...
//   if (std::optional<int64_t> at = StampOf(payload)) latency = MonotonicNowNs() - *at;
#ifndef OMNISTAGE_COMMON_PRODUCTION_STAMP_H_
#define OMNISTAGE_COMMON_PRODUCTION_STAMP_H_

#include <cstdint>
#include <optional>

#include "protos/common.pb.h"

namespace omnistage {

// CLOCK_MONOTONIC in nanoseconds.
int64_t MonotonicNowNs();

// A raw payload of "omnistage-stamp:" and `ns` (8 bytes, little-endian).
v1::Payload StampPayload(int64_t ns);

// The stamp `payload` carries, if it is one.
std::optional<int64_t> StampOf(const v1::Payload& payload);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_PRODUCTION_STAMP_H_
