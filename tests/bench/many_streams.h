// The "many" scenario's client of //tests/bench:gateway_benchmark: thousands
// of streamed chat completions opened through the gateway from one thread
// (non-blocking sockets, level-triggered epoll, a chunked-body decoder feeding
// gateway_load.h's SseReader), held open once every one has its first token,
// then closed; tokens are counted as gateway_load.h's clients count them.
//
//   SwarmOptions options;
//   options.port = (*stack)->gateway.port;  // GatewayStack, gateway_load.h
//   options.streams = 2000;
//   options.sample = [&] { /* read the gateway's threads and RSS */ };
//   SwarmResult result = RunSwarm(options);
#ifndef OMNISTAGE_TESTS_BENCH_MANY_STREAMS_H_
#define OMNISTAGE_TESTS_BENCH_MANY_STREAMS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/time.h"

namespace omnistage {
namespace bench {

struct SwarmOptions {
  int port = 0;
  int streams = 2000;
  uint32_t max_tokens = 1000000;
  // Connections opened but without a first token yet, at most: the gateway's
  // listen backlog is 128, and a dropped SYN costs a second.
  int max_pending = 100;
  // How long opening every stream (to its first token) may take.
  absl::Duration open_timeout = absl::Seconds(60);
  // How long every stream stays open once each has its first token.
  absl::Duration hold = absl::Seconds(2);
  // Called when the hold starts, then about every 100 ms, and when it ends.
  std::function<void()> sample;
};

struct SwarmResult {
  int streams = 0;
  int with_token = 0;       // Streams that had a token when the hold started.
  int failed = 0;           // Refused, not 200, an error event, or closed early.
  int open_at_end = 0;      // Streams still open (no [DONE]) when the hold ended.
  double open_seconds = 0;  // First connect -> every stream with a token.
  double hold_seconds = 0;
  int64_t hold_tokens = 0;  // Tokens received during the hold.
  std::string first_error;
};
// Opens `streams` streamed chat completions from this one thread, holds them
// open, and closes them all (the gateway cancels their requests).
SwarmResult RunSwarm(const SwarmOptions& options);

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_MANY_STREAMS_H_
