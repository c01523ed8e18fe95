// Limits both services agree on. The protos document them field by field; each
// is defined here once.
#ifndef OMNISTAGE_COMMON_LIMITS_H_
#define OMNISTAGE_COMMON_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace omnistage {

// A request id is 1..128 bytes.
inline constexpr size_t kMaxRequestIdBytes = 128;

// An identity (a tokens file's entry, GenerateRequest.on_behalf_of) is at
// most this long.
inline constexpr size_t kMaxIdentityBytes = 128;

// A GenerateRequest's session_key is at most this long (empty: none;
// docs/routing.md).
inline constexpr size_t kMaxSessionKeyBytes = 256;
// The most a request's latency objective may be, in milliseconds (ten
// minutes; GenerateRequest.objectives).
inline constexpr uint32_t kMaxObjectiveMs = 600000;

// A stage's max_tokens lies in [1, kMaxTokensLimit].
inline constexpr int64_t kMaxTokensLimit = 1000000;

// A stage's sampling temperature lies in [0, kMaxTemperature] (and is a number).
inline constexpr float kMaxTemperature = 100;

// The largest message a stage worker accepts by default (its --max_message_bytes);
// each worker announces its own limit in Ready.max_message_bytes.
// Also the default of every other gRPC server's (common/grpc/grpc_util.h).
inline constexpr int64_t kDefaultWorkerMaxMessageBytes = int64_t{16} << 20;

// The largest message our gRPC clients accept from our servers: the
// orchestrator from a worker (a batch of events), the gateway and the load
// generators from an orchestrator (a response with audio). It stands above
// anything a server sends in one message, so gRPC's 4 MiB default never fails
// a large output; what a server accepts is its own, smaller, limit.
inline constexpr int kMaxReceivedResponseBytes = 64 << 20;

// Room an AddRequest needs besides its input: the request id, the parameters and
// the framing. A prompt must leave this much of a worker's message limit free.
inline constexpr int64_t kAddRequestEnvelopeBytes = int64_t{64} << 10;

// A GenerateRequest's fields besides its prompt (stage parameters and their
// extras) may take at most this much: with the prompt, a request the
// orchestrator accepts always fits the AddRequest a worker accepts.
inline constexpr int64_t kMaxRequestFieldsBytes = int64_t{32} << 10;

// Audio a client streams in (GenerateDuplex): its rate and channels lie in
// these ranges (0 channels is read as mono).
inline constexpr int kMinAudioSampleRateHz = 1000;
inline constexpr int kMaxAudioSampleRateHz = 384000;
inline constexpr int kMaxAudioChannels = 8;

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_LIMITS_H_
