#include "client/status_table.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/modality.h"

namespace omnistage {
namespace {

using Row = std::vector<std::string>;

// Rows as columns padded to their widest cell, two spaces apart, each line
// starting with `indent`; no trailing spaces.
std::string Columns(const std::vector<Row>& rows, const std::string& indent) {
  std::vector<size_t> widths;
  for (const Row& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const Row& row : rows) {
    std::string line = indent;
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&line, row[i]);
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 2, ' ');
    }
    absl::StrAppend(&out, absl::StripTrailingAsciiWhitespace(line), "\n");
  }
  return out;
}

std::string StateName(const v1::ReplicaStatus& replica) {
  switch (replica.state()) {
    case v1::ReplicaStatus::STATE_LIVE:
      return "live";
    case v1::ReplicaStatus::STATE_DRAINING:
      return replica.retiring() ? "retiring" : "draining";
    case v1::ReplicaStatus::STATE_DEAD:
      return "dead";
    default:
      return replica.alive() ? "live" : "unknown";
  }
}

// "load/capacity"; "-" for a load never reported.
std::string Load(const v1::ReplicaStatus& replica) {
  return absl::StrCat(replica.load_age_ms() < 0 ? "-" : absl::StrCat(replica.load_requests()), "/",
                      replica.capacity());
}

// The message on one line, cut at kMaxErrorChars.
std::string ShortError(const std::string& error) {
  std::string line = absl::StrReplaceAll(error, {{"\r\n", " "}, {"\n", " "}, {"\t", " "}});
  if (line.size() <= static_cast<size_t>(kMaxErrorChars)) return line;
  line.resize(kMaxErrorChars - 3);
  return absl::StrCat(absl::StripTrailingAsciiWhitespace(line), "...");
}

std::string ScalingLine(const v1::StageScaling& s) {
  return absl::StrFormat(
      "scaling: saturation %.2f (%d held, %d waiting, capacity %d on %d live); "
      "recommended replicas %d (demand %.2f: %.2f req/s x %.3f s a slot)\n",
      s.saturation(), s.held_requests(), s.waiting_requests(), s.capacity(), s.live_replicas(),
      s.recommended_replicas(), s.demand_replicas(), s.arrivals_per_second(),
      s.slot_seconds_per_request());
}

// The stage's audio streams, once it has held one or measured its capacity.
std::string AudioLine(const v1::StageScaling& s) {
  if (s.audio_requests() == 0 && !s.audio_capacity_known()) return "";
  if (!s.audio_capacity_known()) {
    return absl::StrFormat("audio: %d request(s); capacity not measured yet\n", s.audio_requests());
  }
  return absl::StrFormat(
      "audio: %d request(s); capacity %.0f streams at real time%s (demand %.2f replicas)\n",
      s.audio_requests(), s.audio_stream_capacity(),
      s.audio_limited() ? ", limits the pipeline" : "", s.audio_demand_replicas());
}

std::string Stage(const v1::StageStatus& stage) {
  // A stage of workers at fixed addresses names no engine: they run their own.
  std::string out = absl::StrCat(
      "stage ", stage.stage_id(), " ", stage.name(),
      stage.engine().empty() ? "" : absl::StrCat(" (engine ", stage.engine(), ")"), "\n");
  if (!stage.discovery_error().empty()) {
    absl::StrAppend(&out, "  discovery: ", ShortError(stage.discovery_error()), "\n");
  }
  if (stage.has_scaling()) {
    absl::StrAppend(&out, "  ", ScalingLine(stage.scaling()));
    if (std::string audio = AudioLine(stage.scaling()); !audio.empty()) {
      absl::StrAppend(&out, "  ", audio);
    }
  }
  if (stage.replicas_size() == 0) return absl::StrCat(out, "  no replicas\n");
  std::vector<Row> rows = {{"replica", "address", "state", "load", "bound", "last error"}};
  for (const v1::ReplicaStatus& r : stage.replicas()) {
    rows.push_back({absl::StrCat(r.replica()), r.address().empty() ? "-" : r.address(),
                    StateName(r), Load(r), absl::StrCat(r.bound_requests()),
                    ShortError(r.last_error())});
  }
  return absl::StrCat(out, Columns(rows, "  "));
}

std::string Queue(const v1::PipelineStatus& status) {
  int waiting = 0;
  std::vector<std::string> parts;
  for (const v1::QueuedRequests& q : status.queued()) {
    waiting += q.waiting();
    parts.push_back(
        absl::StrCat(q.priority() < 0 ? "batch" : absl::StrCat("priority ", q.priority()), " ",
                     q.identity().empty() ? "(anonymous)" : q.identity(), ": ", q.waiting()));
  }
  if (parts.empty()) return "0 queued";
  return absl::StrCat(waiting, " queued (", absl::StrJoin(parts, ", "), ")");
}

std::string Orchestrators(const v1::PipelineStatus& status) {
  std::vector<Row> rows = {
      {"node id", "peer address", "reachable", "in flight", "accepting", "error"}};
  for (const v1::OrchestratorStatus& o : status.orchestrators()) {
    rows.push_back({o.node_id().empty() ? "?" : o.node_id(),
                    o.peer_address().empty() ? "(this one)" : o.peer_address(),
                    o.reachable() ? "yes" : "no",
                    o.reachable() ? absl::StrCat(o.in_flight_requests()) : "-",
                    o.reachable() ? (o.accepting() ? "yes" : "no") : "-", ShortError(o.error())});
  }
  return absl::StrCat("orchestrators:\n", Columns(rows, "  "));
}

// "thinker:0,talker:1": the replica each stage ran the request on.
std::string StagesOf(const v1::FinishedRequest& r, const v1::PipelineStatus& status) {
  std::vector<std::string> parts;
  for (const v1::StageReplica& s : r.stages()) {
    const bool named = s.stage_id() >= 0 && s.stage_id() < status.stages_size();
    parts.push_back(absl::StrCat(
        named ? status.stages(s.stage_id()).name() : absl::StrCat("stage ", s.stage_id()), ":",
        s.replica()));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, ",");
}

std::string Recent(const v1::PipelineStatus& status) {
  std::vector<Row> rows = {{"request", "identity", "finish", "first output", "first audio",
                            "stalls", "duration", "stages", "error"}};
  for (int i = 0; i < status.recent_size() && i < kRecentShown; ++i) {
    const v1::FinishedRequest& r = status.recent(i);
    const bool audio = r.audio_seconds() > 0;
    rows.push_back(
        {r.request_id(), r.identity().empty() ? "-" : r.identity(),
         FinishReasonName(r.finish_reason()),
         r.first_output_seconds() < 0 ? "-"
                                      : absl::StrFormat("%.0f ms", r.first_output_seconds() * 1000),
         audio ? absl::StrFormat("%.0f ms", r.first_audio_seconds() * 1000) : "-",
         !audio ? "-"
         : r.playback_stalls() == 0
             ? "0"
             : absl::StrFormat("%d (%.0f ms)", r.playback_stalls(), r.stalled_seconds() * 1000),
         absl::StrFormat("%.0f ms", r.duration_seconds() * 1000), StagesOf(r, status),
         ShortError(r.error())});
  }
  return absl::StrCat("\nrecent requests (newest first, ", rows.size() - 1, " of ",
                      status.recent_size(), "):\n", Columns(rows, "  "));
}

// "audio: 12 streams playing (0.52 s to make a second of each); capacity
// 62 streams at real time, new audio requests wait at 55".
std::string Audio(const v1::AudioCapacityStatus& audio) {
  std::string line = absl::StrFormat("audio: %d stream(s) playing", audio.playing());
  if (audio.seconds_per_audio_second() > 0) {
    absl::StrAppend(&line, absl::StrFormat(" (%.2f s to make a second of each)",
                                           audio.seconds_per_audio_second()));
  }
  absl::StrAppend(&line, "; capacity ",
                  audio.capacity_known()
                      ? absl::StrFormat("%.0f streams at real time", audio.capacity_streams())
                      : std::string("not measured yet"));
  if (audio.admission_limit() > 0) {
    absl::StrAppend(&line, ", new audio requests wait at ", audio.admission_limit());
  }
  return line;
}

}  // namespace

std::string FormatStatusTable(const v1::PipelineStatus& status) {
  std::string out =
      absl::StrCat("orchestrator ", status.node_id().empty() ? "?" : status.node_id(), ": ",
                   status.accepting() ? "accepting" : "draining (not accepting)", ", ",
                   status.in_flight_requests(), " in flight, ", Queue(status), "\n");
  if (status.invariant_violations() > 0) {
    absl::StrAppend(&out, "invariant violations: ", status.invariant_violations(),
                    " (a bug of omnistage: see its log)\n");
  }
  if (status.audio().playing() > 0 || status.audio().capacity_known()) {
    absl::StrAppend(&out, Audio(status.audio()), "\n");
  }
  if (status.cluster()) absl::StrAppend(&out, Orchestrators(status));
  for (const v1::StageStatus& stage : status.stages()) absl::StrAppend(&out, "\n", Stage(stage));
  if (status.recent_size() > 0) absl::StrAppend(&out, Recent(status));
  return out;
}

}  // namespace omnistage
