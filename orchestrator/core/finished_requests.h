// FinishedRequests: what the orchestrator keeps of the requests it finished:
// one access log line per request, and the most recent records for
// GetPipelineStatus.recent (docs/observability.md, "Access log"). And
// RequestAccount, what a request's record counts while it runs.
//
//   r.account = RequestAccount(now, jitter_buffer);     // admitted
//   r.account.Delivered(payload, now);                  // each output to the client
//   v1::FinishedRequest record = r.account.Close(terminal, now);   // its terminal
//   ... request_id, identity and the stages it ran on ...
//   finished.Add(std::move(record), r.trace_id);
//   // 2026-11-30T18:40:13.550190Z info orchestrator request=req-41 access identity=alice
//   //   finish=stop stages=thinker:0@thinker-0-4711-1,vocoder:1@vocoder-1-4711-1
//   //   output_tokens=12 audio_seconds=1.250 first_output_ms=20.0 duration_ms=130.5
//   //   first_audio_ms=95.2 rtf=0.081 stalls=0 stalled_ms=0.0
//
// Every admitted request gets one record, made where its one terminal is sent
// (PipelineCore::EndRequests). A call refused before it was admitted gets
// none: it has its refusal (a debug line, omnistage_request_refusals_total).
//
// Not thread-safe: owned by the event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_FINISHED_REQUESTS_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_FINISHED_REQUESTS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/playback_model.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "protos/common.pb.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// What one request's record counts while it runs: since when, the first
// output its client got, the output tokens (one per token id, one per word of
// text: what the output-token rate limit charges), and how a listener who
// plays its audio as it comes (after `jitter_buffer`) hears it.
class RequestAccount {
 public:
  RequestAccount() = default;
  explicit RequestAccount(absl::Time admitted, absl::Duration jitter_buffer = absl::ZeroDuration())
      : admitted_(admitted), playback_(jitter_buffer) {}

  // `payload` went to the client at `now`. Returns the output tokens it
  // counts.
  int64_t Delivered(const v1::Payload& payload, absl::Time now);
  // The record of the request ending with `terminal` at `now`: all but its
  // id, identity and stages.
  v1::FinishedRequest Close(const v1::Terminal& terminal, absl::Time now) const;

  // The listener of its audio so far, and what it heard since admission.
  const PlaybackModel& playback() const { return playback_; }
  absl::Time admitted() const { return admitted_; }
  PlaybackFigures Heard() const { return playback_.Figures(admitted_); }

 private:
  absl::Time admitted_;
  absl::Time first_output_ = absl::InfiniteFuture();
  absl::Time last_output_;
  // Payloads delivered.
  int64_t outputs_ = 0;
  int64_t output_tokens_ = 0;
  PlaybackModel playback_;
};

class FinishedRequests {
 public:
  static constexpr size_t kRecent = 50;

  // `stage_names[s]` names stage s on the lines; `capacity`: the records
  // kept (at least 1).
  explicit FinishedRequests(std::vector<std::string> stage_names, size_t capacity = kRecent);

  // Off: no access lines (the records are still kept).
  void set_access_log(bool on) { access_log_ = on; }
  bool access_log() const { return access_log_; }

  // Keeps `record`, dropping the oldest past the capacity, and writes its
  // access line at info, carrying `trace_id` (empty: none).
  void Add(v1::FinishedRequest record, const std::string& trace_id);
  // The records kept, newest first.
  void AppendTo(google::protobuf::RepeatedPtrField<v1::FinishedRequest>* out) const;
  size_t size() const { return ring_.size(); }

  // The access line's message for `record` ("access identity=... finish=...").
  std::string AccessLine(const v1::FinishedRequest& record) const;

 private:
  const std::vector<std::string> stage_names_;
  const size_t capacity_;
  bool access_log_ = true;
  // A ring: once full, `next_` is the oldest, overwritten next.
  std::vector<v1::FinishedRequest> ring_;
  size_t next_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_FINISHED_REQUESTS_H_
