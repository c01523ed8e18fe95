// ServedRequests: the gateway's own record of the chat completions it served —
// a count since start and the most recent ones, newest first — for the live
// console (docs/console.md) to show when the orchestrator's status carries no
// recent requests of its own (PipelineStatus.recent).
//
//   ServedRequests served(50);
//   served.Add({"req-1f...", "stop", "", 200, 1.25, 1700000000000});
//   for (const ServedRequest& r : served.newest_first()) ...
//
// Not thread-safe: the gateway keeps it on its HTTP loop thread.
#ifndef OMNISTAGE_GATEWAY_CONSOLE_SERVED_REQUESTS_H_
#define OMNISTAGE_GATEWAY_CONSOLE_SERVED_REQUESTS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>

namespace omnistage {

struct ServedRequest {
  // The orchestrator's request id; "" when the call never got one (refused
  // before the pipeline took it).
  std::string request_id;
  // How it ended: "stop", "length", "abort", "error" (the pipeline's finish
  // reason), "refused" (answered with an error before any output), or
  // "client_closed" (the client went away first).
  std::string outcome;
  // With "error" or "refused": why, as the client was told.
  std::string error;
  // The HTTP status answered (200 for a stream that began).
  int http_status = 0;
  double duration_seconds = 0;
  // When it ended (Unix time, milliseconds).
  int64_t finished_unix_ms = 0;
  // How a listener heard its audio, as the gateway wrote it
  // (docs/observability.md, "How a listener hears it"); -1 and 0 without
  // audio.
  double first_audio_seconds = -1;
  int64_t playback_stalls = 0;
  double stalled_seconds = 0;
};

class ServedRequests {
 public:
  // Keeps the `capacity` most recent (at least 1).
  explicit ServedRequests(size_t capacity);

  void Add(ServedRequest request);
  // Newest first, at most `capacity`.
  const std::deque<ServedRequest>& newest_first() const { return recent_; }
  // Every one added since start.
  int64_t total() const { return total_; }

 private:
  const size_t capacity_;
  std::deque<ServedRequest> recent_;
  int64_t total_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CONSOLE_SERVED_REQUESTS_H_
