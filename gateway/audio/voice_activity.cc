#include "gateway/audio/voice_activity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "webrtc/modules/audio_processing/include/audio_processing.h"

namespace omnistage {
namespace {

constexpr int kMaxOptionMs = 10000;
constexpr double kFloorRiseDbPerSecond = 3;
constexpr double kMinFloorRms = 10;
constexpr int kMaxGapMs = 50;

// The detector's likelihood in the module's terms, by threshold: mode 0
// (kHighLikelihood, the most ready to call audio voiced) below 0.25, and so on.
webrtc::VoiceDetection::Likelihood LikelihoodFor(double threshold) {
  constexpr webrtc::VoiceDetection::Likelihood kByMode[] = {
      webrtc::VoiceDetection::kHighLikelihood, webrtc::VoiceDetection::kModerateLikelihood,
      webrtc::VoiceDetection::kLowLikelihood, webrtc::VoiceDetection::kVeryLowLikelihood};
  return kByMode[std::min(3, static_cast<int>(threshold * 4))];
}

}  // namespace

absl::StatusOr<std::unique_ptr<VoiceActivity>> VoiceActivity::Create(
    const VoiceActivityOptions& options) {
  if (!(options.threshold >= 0 && options.threshold <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("turn_detection.threshold must be 0 to 1, not ", options.threshold));
  }
  if (options.prefix_padding_ms < 0 || options.prefix_padding_ms > kMaxOptionMs) {
    return absl::InvalidArgumentError(absl::StrCat("turn_detection.prefix_padding_ms must be 0 to ",
                                                   kMaxOptionMs, ", not ",
                                                   options.prefix_padding_ms));
  }
  if (options.silence_duration_ms < 0 || options.silence_duration_ms > kMaxOptionMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("turn_detection.silence_duration_ms must be 0 to ", kMaxOptionMs, ", not ",
                     options.silence_duration_ms));
  }
  // The detector alone: the module's other components are off unless enabled,
  // except the experimental gain control, which is on by default (and idle
  // without gain control): off all the same.
  webrtc::Config config;
  config.Set<webrtc::ExperimentalAgc>(new webrtc::ExperimentalAgc(false));
  std::unique_ptr<webrtc::AudioProcessing> apm(webrtc::AudioProcessing::Create(config));
  if (apm == nullptr) return absl::InternalError("WebRTC's AudioProcessing could not be created");
  using Layout = webrtc::AudioProcessing::ChannelLayout;
  int error = apm->Initialize(kSampleRateHz, kSampleRateHz, kSampleRateHz, Layout::kMono,
                              Layout::kMono, Layout::kMono);
  webrtc::VoiceDetection* detection = apm->voice_detection();
  if (error == webrtc::AudioProcessing::kNoError) {
    error = detection->set_likelihood(LikelihoodFor(options.threshold));
  }
  if (error == webrtc::AudioProcessing::kNoError) error = detection->set_frame_size_ms(kFrameMs);
  if (error == webrtc::AudioProcessing::kNoError) error = detection->Enable(true);
  if (error != webrtc::AudioProcessing::kNoError) {
    return absl::InternalError(
        absl::StrCat("WebRTC's voice detection refused its settings: error ", error));
  }
  return std::unique_ptr<VoiceActivity>(new VoiceActivity(options, std::move(apm)));
}

VoiceActivity::VoiceActivity(const VoiceActivityOptions& options,
                             std::unique_ptr<webrtc::AudioProcessing> apm)
    : options_(options),
      // 20 x threshold^2 dB.
      gate_ratio_(std::pow(10.0, options.threshold * options.threshold)),
      start_frames_(6 + static_cast<int>(std::lround(8 * options.threshold))),
      apm_(std::move(apm)) {}

VoiceActivity::~VoiceActivity() = default;

std::vector<VoiceEvent> VoiceActivity::Push(absl::Span<const int16_t> samples) {
  std::vector<VoiceEvent> events;
  samples_pushed_ += static_cast<int64_t>(samples.size());
  for (int16_t sample : samples) {
    frame_[frame_filled_++] = sample / 32768.0f;
    frame_energy_ += static_cast<double>(sample) * sample;
    if (frame_filled_ < kFrameSamples) continue;
    const double rms = std::sqrt(frame_energy_ / kFrameSamples);
    frame_filled_ = 0;
    frame_energy_ = 0;
    Step(Voiced(rms), &events);
  }
  return events;
}

bool VoiceActivity::Voiced(double rms) {
  static const double kFloorRisePerFrame = std::pow(10.0, kFloorRiseDbPerSecond / 20 / 100);
  floor_rms_ = frames_done_ == 0 ? rms : std::min(rms, floor_rms_ * kFloorRisePerFrame);
  // The detector hears every frame, gated or not: its noise model learns from
  // them all.
  const float* in[] = {frame_.data()};
  float* out[] = {frame_.data()};
  const webrtc::StreamConfig stream(kSampleRateHz, 1);
  const int error = apm_->ProcessStream(in, stream, stream, out);
  if (error != webrtc::AudioProcessing::kNoError) {
    // A whole frame at the rate the module was set up for: it has no reason
    // to refuse one.
    std::fprintf(stderr, "WebRTC's AudioProcessing refused a 10 ms frame: error %d\n", error);
    std::abort();
  }
  return apm_->voice_detection()->stream_has_voice() &&
         rms >= std::max(floor_rms_, kMinFloorRms) * gate_ratio_;
}

void VoiceActivity::Step(bool voiced, std::vector<VoiceEvent>* events) {
  const int64_t start_ms = frames_done_ * kFrameMs;
  const int64_t end_ms = start_ms + kFrameMs;
  ++frames_done_;
  if (voiced && !in_speech_) {
    if (run_frames_ == 0 || start_ms - last_voiced_end_ms_ > kMaxGapMs) {
      run_frames_ = 0;
      run_start_ms_ = start_ms;
    }
    ++run_frames_;
  }
  if (voiced) last_voiced_end_ms_ = end_ms;
  if (!in_speech_) {
    if (run_frames_ < start_frames_) return;
    in_speech_ = true;
    events->push_back({VoiceEvent::kSpeechStarted,
                       std::max<int64_t>(0, run_start_ms_ - options_.prefix_padding_ms), end_ms});
  } else if (!voiced && end_ms - last_voiced_end_ms_ >= options_.silence_duration_ms) {
    in_speech_ = false;
    run_frames_ = 0;
    events->push_back({VoiceEvent::kSpeechStopped, last_voiced_end_ms_, end_ms});
  }
}

void VoiceActivity::Reset() {
  in_speech_ = false;
  run_frames_ = 0;
}

}  // namespace omnistage
