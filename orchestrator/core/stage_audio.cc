#include "orchestrator/core/stage_audio.h"

#include <utility>

#include "common/modality.h"

namespace omnistage {

StageAudio::StageAudio(CoreParts core) : core_(core), last_sample_(core.scheduler->Now()) {
  stages_.reserve(core.config->stages.size());
  for (size_t s = 0; s < core.config->stages.size(); ++s) {
    stages_.emplace_back(core.config->scaling.window);
  }
}

double StageAudio::Units(const v1::Payload& payload) {
  switch (payload.kind_case()) {
    case v1::Payload::kText:
      return static_cast<double>(payload.text().text().size());
    case v1::Payload::kTokens:
      return payload.tokens().ids_size();
    case v1::Payload::kAudio:
      return AudioSecondsOf(payload.audio());
    case v1::Payload::kRaw:
      return static_cast<double>(payload.raw().size());
    case v1::Payload::KIND_NOT_SET:
      break;
  }
  return 0;
}

void StageAudio::Ended(const InFlightRequest& r, const v1::Terminal& terminal) {
  // An aborted or failed request's stages stopped part way: their output
  // says nothing of the audio it would have come to.
  if (terminal.finish_reason() != v1::FINISH_REASON_STOP &&
      terminal.finish_reason() != v1::FINISH_REASON_LENGTH) {
    return;
  }
  const double audio = r.account.playback().audio_seconds();
  if (!r.wants_audio || !(audio > 0)) return;
  for (size_t s = 0; s < stages_.size() && s < r.stages.size(); ++s) {
    if (!(r.stages[s].produced > 0)) continue;
    stages_[s].audio_seconds += audio;
    stages_[s].units += r.stages[s].produced;
  }
}

void StageAudio::Sample() {
  const absl::Time now = core_.scheduler->Now();
  const absl::Duration interval = now - last_sample_;
  last_sample_ = now;
  std::vector<absl::flat_hash_map<std::string, double>> produced(stages_.size());
  std::vector<int> streams(stages_.size(), 0);
  std::vector<double> units(stages_.size(), 0);
  std::vector<int> requests(stages_.size(), 0);
  running_ = 0;
  queued_ = 0;
  core_.table->ForEach([&](const InFlightRequest& r) {
    if (!r.wants_audio) return;
    ++(r.queued ? queued_ : running_);
    for (size_t s = 0; s < stages_.size() && s < r.stages.size(); ++s) {
      const StageProgress& stage = r.stages[s];
      if (!stage.started || stage.finished) continue;
      ++requests[s];
      if (!(stage.produced > 0)) continue;  // Not producing yet.
      produced[s][r.id] = stage.produced;
      // Producing through the whole interval: at the last sample too.
      if (auto before = stages_[s].produced.find(r.id); before != stages_[s].produced.end()) {
        ++streams[s];
        units[s] += stage.produced - before->second;
      }
    }
  });
  for (size_t s = 0; s < stages_.size(); ++s) {
    Stage& stage = stages_[s];
    stage.produced = std::move(produced[s]);
    stage.requests = requests[s];
    // The replicas serving requests: draining ones too.
    const StagePool& pool = core_.pool(static_cast<int>(s));
    int live = 0;
    for (int r = 0; r < pool.size(); ++r) live += pool.alive(r) ? 1 : 0;
    // Unknown until a request taught the stage its audio per unit.
    if (live == 0 || !(stage.units > 0)) continue;
    // The load: all it produces for now, per replica.
    const double audio = units[s] * stage.audio_seconds / stage.units;
    stage.capacity.Sample(static_cast<double>(stage.produced.size()) / live, streams[s], audio,
                          interval);
  }
}

StageAudioLoad StageAudio::Load(int stage) const {
  const Stage& s = stages_[stage];
  StageAudioLoad load;
  load.requests = s.requests;
  // Its share of the audio requests in flight, of those queued too: they
  // pass every stage.
  load.offered = s.requests;
  if (running_ > 0) load.offered += static_cast<double>(queued_) * s.requests / running_;
  if (stage == 0 && running_ == 0) load.offered += queued_;
  load.per_replica = s.capacity.Streams();
  return load;
}

}  // namespace omnistage
