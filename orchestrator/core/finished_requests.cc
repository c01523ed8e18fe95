#include "orchestrator/core/finished_requests.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/criticality.h"
#include "common/log.h"
#include "common/modality.h"

namespace omnistage {
namespace {

// A token payload counts its ids, a text payload its words.
int64_t OutputTokensOf(const v1::Payload& payload) {
  if (payload.has_tokens()) return payload.tokens().ids_size();
  if (!payload.has_text()) return 0;
  int64_t words = 0;
  bool in_word = false;
  for (char c : payload.text().text()) {
    const bool space = absl::ascii_isspace(static_cast<unsigned char>(c));
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

// A value on the line: bare when it is one plain word, else quoted with C
// escapes, so that every key=value pair splits on spaces.
std::string LineValue(absl::string_view value) {
  const bool plain = !value.empty() && std::none_of(value.begin(), value.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u <= ' ' || u == 0x7f || c == '"' || c == '\\' || c == '=';
  });
  if (plain) return std::string(value);
  return absl::StrCat("\"", absl::Utf8SafeCEscape(value), "\"");
}

}  // namespace

// ---- RequestAccount -----------------------------------------------------------------

int64_t RequestAccount::Delivered(const v1::Payload& payload, absl::Time now) {
  first_output_ = std::min(first_output_, now);
  last_output_ = now;
  ++outputs_;
  const int64_t tokens = OutputTokensOf(payload);
  output_tokens_ += tokens;
  if (payload.has_audio()) playback_.Arrived(AudioSecondsOf(payload.audio()), now);
  return tokens;
}

v1::FinishedRequest RequestAccount::Close(const v1::Terminal& terminal, absl::Time now) const {
  v1::FinishedRequest record;
  record.set_finish_reason(terminal.finish_reason());
  if (terminal.has_error()) {
    record.set_error(absl::StrCat(
        absl::StatusCodeToString(static_cast<absl::StatusCode>(terminal.error().code())), ": ",
        terminal.error().message()));
  }
  record.set_output_tokens(output_tokens_);
  record.set_audio_seconds(playback_.audio_seconds());
  record.set_first_output_seconds(first_output_ == absl::InfiniteFuture()
                                      ? -1
                                      : absl::ToDoubleSeconds(first_output_ - admitted_));
  record.set_duration_seconds(absl::ToDoubleSeconds(now - admitted_));
  // Per token after the first; per output for output without tokens.
  const int64_t units = output_tokens_ > 1 ? output_tokens_ : outputs_;
  if (units > 1) {
    record.set_between_outputs_seconds(absl::ToDoubleSeconds(last_output_ - first_output_) /
                                       static_cast<double>(units - 1));
  }
  record.set_finished_unix_ms(absl::ToUnixMillis(now));
  const PlaybackFigures heard = Heard();
  record.set_first_audio_seconds(heard.first_audio_seconds);
  record.set_real_time_factor(heard.real_time_factor);
  record.set_playback_stalls(heard.stalls);
  record.set_stalled_seconds(heard.stalled_seconds);
  return record;
}

// ---- FinishedRequests ---------------------------------------------------------------

FinishedRequests::FinishedRequests(std::vector<std::string> stage_names, size_t capacity)
    : stage_names_(std::move(stage_names)), capacity_(std::max<size_t>(capacity, 1)) {
  ring_.reserve(capacity_);
}

void FinishedRequests::Add(v1::FinishedRequest record, const std::string& trace_id) {
  if (access_log_) LogInfo({record.request_id(), -1, -1, trace_id}, AccessLine(record));
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(record));
  } else {
    ring_[next_] = std::move(record);
  }
  next_ = (next_ + 1) % capacity_;
}

void FinishedRequests::AppendTo(
    google::protobuf::RepeatedPtrField<v1::FinishedRequest>* out) const {
  // The newest is just before next_.
  for (size_t i = 1; i <= ring_.size(); ++i) {
    *out->Add() = ring_[(next_ + capacity_ - i) % capacity_];
  }
}

std::string FinishedRequests::AccessLine(const v1::FinishedRequest& record) const {
  std::vector<std::string> stages;
  for (const v1::StageReplica& ran : record.stages()) {
    const size_t s = static_cast<size_t>(ran.stage_id());
    std::string where = absl::StrCat(s < stage_names_.size() ? stage_names_[s] : absl::StrCat(s),
                                     ":", ran.replica());
    if (!ran.instance_id().empty()) absl::StrAppend(&where, "@", ran.instance_id());
    stages.push_back(std::move(where));
  }
  std::string line = absl::StrCat(
      "access identity=", LineValue(record.identity()),
      " finish=", FinishReasonName(record.finish_reason()),
      " stages=", stages.empty() ? "none" : LineValue(absl::StrJoin(stages, ",")),
      " output_tokens=", record.output_tokens(),
      absl::StrFormat(" audio_seconds=%.3f", record.audio_seconds()), " first_output_ms=",
      record.first_output_seconds() < 0
          ? std::string("none")
          : absl::StrFormat("%.1f", record.first_output_seconds() * 1000),
      absl::StrFormat(" duration_ms=%.1f", record.duration_seconds() * 1000));
  if (record.audio_seconds() > 0) {
    absl::StrAppend(&line,
                    absl::StrFormat(" first_audio_ms=%.1f rtf=%.3f stalls=%d stalled_ms=%.1f",
                                    record.first_audio_seconds() * 1000, record.real_time_factor(),
                                    record.playback_stalls(), record.stalled_seconds() * 1000));
  }
  bool judged = false;
  for (const auto& [name, outcome] :
       {std::pair<const char*, v1::ObjectiveOutcome>{"first_output_objective",
                                                     record.first_output_objective()},
        {"first_audio_objective", record.first_audio_objective()},
        {"between_outputs_objective", record.between_outputs_objective()}}) {
    if (outcome == v1::OBJECTIVE_OUTCOME_NONE) continue;
    judged = true;
    absl::StrAppend(&line, " ", name, "=", outcome == v1::OBJECTIVE_OUTCOME_MET ? "met" : "missed");
  }
  if (judged) {
    absl::StrAppend(&line, " criticality=", CriticalityName(record.criticality()));
    if (record.predicted_first_output_seconds() > 0) {
      absl::StrAppend(&line, absl::StrFormat(" predicted_first_output_ms=%.1f",
                                             record.predicted_first_output_seconds() * 1000));
    }
    if (!record.objective_miss().empty()) {
      absl::StrAppend(&line, " objective_miss=", LineValue(record.objective_miss()));
    }
  }
  if (!record.error().empty()) absl::StrAppend(&line, " error=", LineValue(record.error()));
  return line;
}

}  // namespace omnistage
