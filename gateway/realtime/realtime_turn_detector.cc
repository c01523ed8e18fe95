#include "gateway/realtime/realtime_turn_detector.h"

#include <algorithm>
#include <utility>

#include "absl/status/statusor.h"
#include "common/pcm16.h"

namespace omnistage {
namespace {

// Held beyond prefix_padding_ms: the detector decides a start up to a few
// hundred ms after the speech began (voice_activity.h).
constexpr int64_t kLookBackMs = 1000;

bool Same(const std::optional<VoiceActivityOptions>& a,
          const std::optional<VoiceActivityOptions>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a.has_value() ||
         (a->threshold == b->threshold && a->prefix_padding_ms == b->prefix_padding_ms &&
          a->silence_duration_ms == b->silence_duration_ms);
}

}  // namespace

RealtimeTurnDetector::RealtimeTurnDetector() = default;
RealtimeTurnDetector::~RealtimeTurnDetector() = default;

absl::Status RealtimeTurnDetector::Configure(const std::optional<VoiceActivityOptions>& options) {
  if (Same(options, pending_ ? pending_options_ : options_)) return absl::OkStatus();
  std::unique_ptr<VoiceActivity> vad;
  if (options.has_value()) {
    absl::StatusOr<std::unique_ptr<VoiceActivity>> made = VoiceActivity::Create(*options);
    if (!made.ok()) return made.status();
    vad = *std::move(made);
  }
  if (in_speech()) {
    pending_ = true;
    pending_vad_ = std::move(vad);
    pending_options_ = options;
  } else {
    Install(std::move(vad), options);
  }
  return absl::OkStatus();
}

void RealtimeTurnDetector::Install(std::unique_ptr<VoiceActivity> vad,
                                   const std::optional<VoiceActivityOptions>& options) {
  vad_ = std::move(vad);
  options_ = options;
  vad_start_byte_ = pushed_bytes_;
  pending_ = false;
  pending_vad_.reset();
  pending_options_.reset();
  if (vad_ == nullptr) {
    held_.clear();
    held_start_byte_ = pushed_bytes_;
  }
}

void RealtimeTurnDetector::ApplyPending() {
  if (pending_ && !in_speech()) Install(std::move(pending_vad_), pending_options_);
}

int64_t RealtimeTurnDetector::ByteAt(int64_t ms) const {
  return vad_start_byte_ + ms * kBytesPerMs;
}

std::vector<TurnPiece> RealtimeTurnDetector::Push(const std::string& pcm) {
  pushed_bytes_ += static_cast<int64_t>(pcm.size());
  std::vector<TurnPiece> pieces;
  if (vad_ == nullptr) {
    held_start_byte_ = pushed_bytes_;
    return pieces;
  }
  held_ += pcm;
  const std::vector<int16_t> samples = MonoSamples(pcm, 1);
  // Hands out the held audio up to session byte `to`.
  auto hand_out = [this, &pieces](int64_t to) {
    const size_t n = static_cast<size_t>(
        std::clamp<int64_t>(to - held_start_byte_, 0, static_cast<int64_t>(held_.size())));
    if (n == 0) return;
    pieces.push_back({TurnPiece::kAudio, 0, held_.substr(0, n)});
    held_.erase(0, n);
    held_start_byte_ += static_cast<int64_t>(n);
  };
  for (const VoiceEvent& event : vad_->Push(samples)) {
    const int64_t at = ByteAt(event.audio_ms);
    if (event.kind == VoiceEvent::kSpeechStarted) {
      // What came before the padded start is no part of the turn.
      const int64_t from = std::max(at, held_start_byte_);
      held_.erase(0, static_cast<size_t>(from - held_start_byte_));
      held_start_byte_ = from;
      pieces.push_back({TurnPiece::kSpeechStarted, at / kBytesPerMs, ""});
    } else {
      hand_out(ByteAt(event.decided_ms));
      pieces.push_back({TurnPiece::kSpeechStopped, at / kBytesPerMs, ""});
    }
  }
  if (in_speech()) {
    hand_out(pushed_bytes_);
  } else {
    ApplyPending();
    // The next turn's prefix is all that is kept.
    if (vad_ != nullptr) {
      const int64_t keep = (options_->prefix_padding_ms + kLookBackMs) * kBytesPerMs;
      if (static_cast<int64_t>(held_.size()) > keep) {
        const size_t drop = held_.size() - static_cast<size_t>(keep);
        held_.erase(0, drop);
        held_start_byte_ += static_cast<int64_t>(drop);
      }
    }
  }
  return pieces;
}

std::string RealtimeTurnDetector::TakeHeld() {
  std::string held = std::move(held_);
  held_.clear();
  held_start_byte_ = pushed_bytes_;
  return held;
}

void RealtimeTurnDetector::Reset() {
  if (vad_ != nullptr) vad_->Reset();
  held_.clear();
  held_start_byte_ = pushed_bytes_;
  ApplyPending();
}

}  // namespace omnistage
