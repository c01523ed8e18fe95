// How well VoiceActivity (the Realtime API's server VAD: WebRTC's detector
// behind an energy gate) finds a turn, against each of its halves alone,
// measured in the same run (docs/benchmarks.md, "Voice activity"):
//
// - turns: 12 sentences, each in 5 espeak-ng voices, resampled to 24 kHz,
//   between silences of random length (seeded), clean or with noise mixed in
//   at 20, 10 and 5 dB SNR (the sentence's RMS over the noise's): white noise,
//   babble (6 espeak-ng talkers at once), clicks (typing: 10 decaying bursts a
//   second). Per detector, threshold and noise: how often the turn was missed
//   (no start or no stop) or split (more than one start), and |error| mean and
//   p90 of audio_start_ms against the true onset less prefix_padding_ms, and of
//   audio_end_ms against the true end (truth: the first and last sample of the
//   clean speech above |500|), with the end's mean signed error;
// - false fires: --noise_seconds of each noise alone at each SNR's level
//   (against the sentences' mean RMS): speech starts per minute, and the share
//   of the time inside a turn;
// - cost: CPU per second of audio.
//
// Options: prefix_padding_ms 300, silence_duration_ms 500 (OpenAI's defaults).
// The baselines take VoiceActivity's turn rules over half its decision: "gate
// alone", a 10 ms frame voiced when its RMS is 20 x threshold^2 dB above the
// noise floor (the quietest frames, followed down at once and up 3 dB a
// second), the simple energy detector; "WebRTC alone", the frame voiced when
// WebRTC's detector (in VoiceActivity's mode for the threshold) says so.
//
//   bazel run -c opt //tests/bench:voice_activity_benchmark
#include <time.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gateway/audio/audio_resampler.h"
#include "gateway/audio/voice_activity.h"
#include "stage_worker/engines/speech/espeak.h"
#include "tests/bench/figures.h"
#include "webrtc/modules/audio_processing/include/audio_processing.h"

ABSL_FLAG(std::string, thresholds, "0.3,0.5,0.8", "thresholds measured");
ABSL_FLAG(int, noise_seconds, 120, "seconds of each noise alone, for the false fires");
ABSL_FLAG(int, seed, 1, "the silences' and the noise's random seed");

namespace omnistage {
namespace bench {
namespace {

constexpr int kRate = VoiceActivity::kSampleRateHz;
constexpr int kPrefixMs = 300;
constexpr int kSilenceMs = 500;
constexpr int kTruthLevel = 500;
const int kSnrs[] = {20, 10, 5};

constexpr const char* kSentences[] = {
    "The quick brown fox jumps over the lazy dog.",
    "Please book a table for two at seven tonight.",
    "What is the weather going to be like tomorrow morning?",
    "Yes.",
    "I would like to hear some music while I cook dinner.",
    "Turn off the lights in the living room.",
    "How many kilometres is it from Paris to Berlin?",
    "Stop!",
    "Remind me to call my sister on Sunday afternoon, after lunch.",
    "The meeting has been moved to half past three.",
    "Can you read me the first chapter again, slowly?",
    "Thank you, that is all for now.",
};

struct Voice {
  const char* voice;
  const char* variant;
};
constexpr Voice kVoices[] = {{"", ""}, {"en-us", ""}, {"", "m3"}, {"", "f2"}, {"en-us", "klatt"}};

constexpr const char* kBabbleSentences[] = {
    "Somewhere across town a bus was running late again.",
    "She said the garden looked wonderful this year.",
    "Numbers on the board kept changing all afternoon.",
    "They walked along the river until the sun went down.",
    "Nobody remembered who had brought the cake.",
    "A long list of questions waited on the desk.",
};
constexpr Voice kBabbleVoices[] = {{"", "m1"}, {"", "f3"},    {"", "m5"},
                                   {"", "f4"}, {"en-us", ""}, {"", "m7"}};

double Rms(const std::vector<float>& x, size_t from, size_t to) {
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += static_cast<double>(x[i]) * x[i];
  return to > from ? std::sqrt(sum / (to - from)) : 0;
}

std::vector<int16_t> ToPcm(const std::vector<float>& x) {
  std::vector<int16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = static_cast<int16_t>(std::lround(std::clamp(x[i], -32768.0f, 32767.0f)));
  }
  return out;
}

// espeak-ng's speech at 24 kHz, as floats.
std::vector<float> Speak(const std::string& text, const Voice& voice) {
  absl::StatusOr<Espeak*> espeak = Espeak::Get();
  if (!espeak.ok()) {
    std::fprintf(stderr, "%s\n", espeak.status().ToString().c_str());
    std::exit(1);
  }
  absl::StatusOr<std::vector<int16_t>> spoken = (*espeak)->Speak(text, voice.variant, voice.voice);
  absl::StatusOr<std::vector<int16_t>> resampled =
      spoken.ok() ? ResampleMono(*spoken, (*espeak)->sample_rate_hz(), kRate) : spoken.status();
  if (!resampled.ok()) {
    std::fprintf(stderr, "%s\n", resampled.status().ToString().c_str());
    std::exit(1);
  }
  return std::vector<float>(resampled->begin(), resampled->end());
}

// A turn: silence, a sentence, silence; where the sentence truly starts and ends.
struct Clip {
  std::vector<float> speech;  // clean
  double rms;                 // of the speech between onset and end
  int64_t onset_ms, end_ms;
};

Clip MakeClip(const std::vector<float>& sentence, std::mt19937* rng) {
  std::uniform_int_distribution<int> pre_ms(500, 2000), post_ms(1500, 2500);
  Clip clip;
  const size_t pre = static_cast<size_t>(pre_ms(*rng)) * kRate / 1000;
  clip.speech.assign(pre, 0.0f);
  clip.speech.insert(clip.speech.end(), sentence.begin(), sentence.end());
  clip.speech.resize(clip.speech.size() + static_cast<size_t>(post_ms(*rng)) * kRate / 1000);
  size_t first = 0, last = 0;
  for (size_t i = 0; i < clip.speech.size(); ++i) {
    if (std::fabs(clip.speech[i]) <= kTruthLevel) continue;
    if (first == 0) first = i;
    last = i;
  }
  clip.onset_ms = static_cast<int64_t>(first) * 1000 / kRate;
  clip.end_ms = static_cast<int64_t>(last + 1) * 1000 / kRate;
  clip.rms = Rms(clip.speech, first, last + 1);
  return clip;
}

// Six talkers at once, `seconds` long, at RMS 1.
std::vector<float> MakeBabble(int seconds, std::mt19937* rng) {
  std::vector<std::vector<float>> sentences;
  for (size_t i = 0; i < std::size(kBabbleSentences); ++i) {
    sentences.push_back(Speak(kBabbleSentences[i], kBabbleVoices[i]));
  }
  const size_t length = static_cast<size_t>(seconds) * kRate;
  std::vector<float> babble(length, 0.0f);
  std::uniform_int_distribution<int> gap(0, kRate * 3 / 10);
  for (size_t talker = 0; talker < sentences.size(); ++talker) {
    size_t at = static_cast<size_t>(gap(*rng)) * talker;
    for (size_t k = talker; at < length; ++k) {
      const std::vector<float>& s = sentences[k % sentences.size()];
      for (size_t i = 0; i < s.size() && at + i < length; ++i) babble[at + i] += s[i];
      at += s.size() + static_cast<size_t>(gap(*rng));
    }
  }
  const double rms = Rms(babble, 0, babble.size());
  for (float& x : babble) x = static_cast<float>(x / rms);
  return babble;
}

enum class NoiseKind { kNone, kWhite, kBabble, kClicks };

struct Noise {
  NoiseKind kind;
  int snr_db;
  std::string name() const {
    if (kind == NoiseKind::kNone) return "clean";
    const char* kind_name = kind == NoiseKind::kWhite    ? "white "
                            : kind == NoiseKind::kBabble ? "babble "
                                                         : "clicks ";
    return absl::StrCat(kind_name, snr_db, " dB");
  }
};

// `length` samples of `noise` at RMS `level` (babble from a random place).
std::vector<float> NoiseOf(NoiseKind kind, double level, size_t length,
                           const std::vector<float>& babble, std::mt19937* rng) {
  std::vector<float> out(length, 0.0f);
  if (kind == NoiseKind::kWhite) {
    std::normal_distribution<float> gauss(0.0f, static_cast<float>(level));
    for (float& x : out) x = gauss(*rng);
  } else if (kind == NoiseKind::kClicks) {
    // Typing: 10 clicks a second at random times, each a burst of white noise
    // decaying by 1/e in 5 ms, scaled to the RMS wanted.
    std::exponential_distribution<double> gap(10.0 / kRate);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    for (double at = gap(*rng); at < length; at += gap(*rng)) {
      const float peak = std::exp(gauss(*rng) * 0.5f);  // louder and softer keys
      for (size_t i = 0; i < static_cast<size_t>(kRate / 20) && at + i < length; ++i) {
        out[static_cast<size_t>(at) + i] +=
            peak * gauss(*rng) * std::exp(-static_cast<float>(i) / (0.005f * kRate));
      }
    }
    const double rms = Rms(out, 0, out.size());
    for (float& x : out) x = static_cast<float>(x * level / rms);
  } else if (kind == NoiseKind::kBabble) {
    size_t at = std::uniform_int_distribution<size_t>(0, babble.size() - 1)(*rng);
    for (float& x : out) {
      x = static_cast<float>(babble[at] * level);
      at = (at + 1) % babble.size();
    }
  }
  return out;
}

// VoiceActivity's turn rules over decisions made elsewhere, frame by frame.
class Turns {
 public:
  explicit Turns(double threshold)
      : start_frames_(6 + static_cast<int>(std::lround(8 * threshold))) {}

  void Step(bool voiced, std::vector<VoiceEvent>* events) {
    const int64_t start_ms = frames_++ * 10, end_ms = start_ms + 10;
    if (voiced && !in_speech_) {
      if (run_ == 0 || start_ms - last_voiced_end_ms_ > kMaxGapMs) {
        run_ = 0;
        run_start_ms_ = start_ms;
      }
      ++run_;
    }
    if (voiced) last_voiced_end_ms_ = end_ms;
    if (!in_speech_) {
      if (run_ < start_frames_) return;
      in_speech_ = true;
      events->push_back(
          {VoiceEvent::kSpeechStarted, std::max<int64_t>(0, run_start_ms_ - kPrefixMs), end_ms});
    } else if (!voiced && end_ms - last_voiced_end_ms_ >= kSilenceMs) {
      in_speech_ = false;
      run_ = 0;
      events->push_back({VoiceEvent::kSpeechStopped, last_voiced_end_ms_, end_ms});
    }
  }

  bool in_speech() const { return in_speech_; }

 private:
  static constexpr int kMaxGapMs = 50;
  const int start_frames_;
  int64_t frames_ = 0;
  bool in_speech_ = false;
  int run_ = 0;
  int64_t run_start_ms_ = 0, last_voiced_end_ms_ = 0;
};

enum class Kind { kVoiceActivity, kGate, kModel };

const char* NameOf(Kind kind) {
  switch (kind) {
    case Kind::kVoiceActivity:
      return "VoiceActivity";
    case Kind::kGate:
      return "gate alone";
    case Kind::kModel:
      return "WebRTC alone";
  }
  return "";
}

// The baselines, each half of VoiceActivity's decision with its turn rules:
// the gate alone (its noise floor and ratio over it, by threshold), or WebRTC's
// model alone (its mode by threshold).
class Baseline {
 public:
  Baseline(Kind kind, double threshold)
      : ratio_(std::pow(10.0, threshold * threshold)), turns_(threshold) {
    if (kind != Kind::kModel) return;
    webrtc::Config config;
    config.Set<webrtc::ExperimentalAgc>(new webrtc::ExperimentalAgc(false));
    apm_.reset(webrtc::AudioProcessing::Create(config));
    using Layout = webrtc::AudioProcessing::ChannelLayout;
    constexpr webrtc::VoiceDetection::Likelihood kByMode[] = {
        webrtc::VoiceDetection::kHighLikelihood, webrtc::VoiceDetection::kModerateLikelihood,
        webrtc::VoiceDetection::kLowLikelihood, webrtc::VoiceDetection::kVeryLowLikelihood};
    if (apm_->Initialize(kRate, kRate, kRate, Layout::kMono, Layout::kMono, Layout::kMono) != 0 ||
        apm_->voice_detection()->set_likelihood(
            kByMode[std::min(3, static_cast<int>(threshold * 4))]) != 0 ||
        apm_->voice_detection()->Enable(true) != 0) {
      std::fprintf(stderr, "WebRTC's AudioProcessing refused its settings\n");
      std::exit(1);
    }
  }

  std::vector<VoiceEvent> Push(absl::Span<const int16_t> samples) {
    std::vector<VoiceEvent> events;
    for (int16_t sample : samples) {
      frame_[filled_] = sample / 32768.0f;
      energy_ += static_cast<double>(sample) * sample;
      if (++filled_ < kFrame) continue;
      const double rms = std::sqrt(energy_ / kFrame);
      energy_ = 0;
      filled_ = 0;
      turns_.Step(apm_ ? Model() : Gate(rms), &events);
    }
    return events;
  }

  bool in_speech() const { return turns_.in_speech(); }

 private:
  static constexpr int kFrame = kRate / 100;
  static constexpr double kMinFloor = 10;
  static constexpr double kRisePerFrame = 1.003460;  // 3 dB a second

  bool Gate(double rms) {
    floor_ = first_ ? rms : std::min(rms, floor_ * kRisePerFrame);
    first_ = false;
    return rms >= std::max(floor_, kMinFloor) * ratio_;
  }

  bool Model() {
    const float* in[] = {frame_.data()};
    float* out[] = {frame_.data()};
    const webrtc::StreamConfig stream(kRate, 1);
    if (apm_->ProcessStream(in, stream, stream, out) != 0) std::abort();
    return apm_->voice_detection()->stream_has_voice();
  }

  const double ratio_;
  Turns turns_;
  std::unique_ptr<webrtc::AudioProcessing> apm_;
  std::array<float, kFrame> frame_{};
  int filled_ = 0;
  double energy_ = 0;
  bool first_ = true;
  double floor_ = 0;
};

// One detector over one stream, pushed 100 ms at a time.
class Detector {
 public:
  Detector(Kind kind, double threshold) {
    if (kind != Kind::kVoiceActivity) {
      baseline_ = std::make_unique<Baseline>(kind, threshold);
      return;
    }
    VoiceActivityOptions options;
    options.threshold = threshold;
    options.prefix_padding_ms = kPrefixMs;
    options.silence_duration_ms = kSilenceMs;
    absl::StatusOr<std::unique_ptr<VoiceActivity>> vad = VoiceActivity::Create(options);
    if (!vad.ok()) {
      std::fprintf(stderr, "%s\n", vad.status().ToString().c_str());
      std::exit(1);
    }
    vad_ = *std::move(vad);
  }

  // The events; `*in_speech` (when given): the share of the pieces after which
  // a turn was going on.
  std::vector<VoiceEvent> Run(const std::vector<int16_t>& pcm, double* cpu_seconds,
                              double* in_speech = nullptr) {
    std::vector<VoiceEvent> events;
    int pieces = 0, speaking = 0;
    const double cpu_start = ThreadCpuSeconds();
    for (size_t at = 0; at < pcm.size(); at += kRate / 10) {
      const absl::Span<const int16_t> piece = absl::MakeConstSpan(pcm).subspan(at, kRate / 10);
      for (const VoiceEvent& event : vad_ ? vad_->Push(piece) : baseline_->Push(piece)) {
        events.push_back(event);
      }
      ++pieces;
      speaking += vad_ ? vad_->in_speech() : baseline_->in_speech();
    }
    *cpu_seconds += ThreadCpuSeconds() - cpu_start;
    if (in_speech != nullptr) *in_speech = pieces > 0 ? static_cast<double>(speaking) / pieces : 0;
    return events;
  }

 private:
  std::unique_ptr<VoiceActivity> vad_;
  std::unique_ptr<Baseline> baseline_;
};

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / v.size();
}

double P90(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(0.9 * v.size()))];
}

int Main() {
  std::vector<double> thresholds;
  for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_thresholds), ',')) {
    double value;
    if (!absl::SimpleAtod(t, &value)) {
      std::fprintf(stderr, "--thresholds: not a number: %s\n", std::string(t).c_str());
      return 2;
    }
    thresholds.push_back(value);
  }
  std::mt19937 rng(static_cast<uint32_t>(absl::GetFlag(FLAGS_seed)));

  std::vector<Clip> clips;
  double mean_rms = 0;
  for (const char* sentence : kSentences) {
    for (const Voice& voice : kVoices) {
      clips.push_back(MakeClip(Speak(sentence, voice), &rng));
      mean_rms += clips.back().rms / (std::size(kSentences) * std::size(kVoices));
    }
  }
  const std::vector<float> babble = MakeBabble(60, &rng);
  std::vector<Noise> noises = {{NoiseKind::kNone, 0}};
  for (NoiseKind kind : {NoiseKind::kWhite, NoiseKind::kBabble, NoiseKind::kClicks}) {
    for (int snr : kSnrs) noises.push_back({kind, snr});
  }
  // Every detector hears the same noisy clips.
  std::vector<std::vector<std::vector<int16_t>>> noisy(noises.size());
  double audio_seconds = 0;
  for (size_t n = 0; n < noises.size(); ++n) {
    for (const Clip& clip : clips) {
      const double level = clip.rms / std::pow(10.0, noises[n].snr_db / 20.0);
      std::vector<float> mixed = NoiseOf(noises[n].kind, level, clip.speech.size(), babble, &rng);
      for (size_t i = 0; i < mixed.size(); ++i) mixed[i] += clip.speech[i];
      noisy[n].push_back(ToPcm(mixed));
      audio_seconds += static_cast<double>(mixed.size()) / kRate;
    }
  }
  const size_t noise_length = static_cast<size_t>(absl::GetFlag(FLAGS_noise_seconds)) * kRate;
  std::vector<std::vector<int16_t>> noise_alone(noises.size());
  for (size_t n = 1; n < noises.size(); ++n) {
    noise_alone[n] =
        ToPcm(NoiseOf(noises[n].kind, mean_rms / std::pow(10.0, noises[n].snr_db / 20.0),
                      noise_length, babble, &rng));
  }

  std::printf(
      "%zu clips (%zu sentences x %zu voices), %.0f s of audio per detector, threshold "
      "and noise; speech RMS %.0f mean; prefix_padding_ms %d, silence_duration_ms %d\n",
      clips.size(), std::size(kSentences), std::size(kVoices), audio_seconds / noises.size(),
      mean_rms, kPrefixMs, kSilenceMs);
  struct Row {
    std::string name;  // detector and threshold
    std::vector<std::string> turns, starts, ends, false_fires;
    double cpu_us_per_second = 0;
  };
  std::vector<Row> rows;
  for (Kind kind : {Kind::kVoiceActivity, Kind::kGate, Kind::kModel}) {
    for (double threshold : thresholds) {
      Row row;
      row.name = absl::StrFormat("| %s | %.1f |", NameOf(kind), threshold);
      double cpu = 0;
      for (size_t n = 0; n < noises.size(); ++n) {
        int missed = 0, split = 0;
        std::vector<double> start_errors, end_errors;
        double end_bias = 0;
        for (size_t c = 0; c < clips.size(); ++c) {
          Detector detector(kind, threshold);
          int starts = 0;
          std::optional<int64_t> first_start, last_stop;
          for (const VoiceEvent& event : detector.Run(noisy[n][c], &cpu)) {
            if (event.kind == VoiceEvent::kSpeechStopped) {
              last_stop = event.audio_ms;
            } else if (starts++ == 0) {
              first_start = event.audio_ms;
            }
          }
          if (!first_start || !last_stop) {
            ++missed;
            continue;
          }
          if (starts > 1) ++split;
          const int64_t want_start = std::max<int64_t>(0, clips[c].onset_ms - kPrefixMs);
          start_errors.push_back(std::fabs(static_cast<double>(*first_start - want_start)));
          end_errors.push_back(std::fabs(static_cast<double>(*last_stop - clips[c].end_ms)));
          end_bias += static_cast<double>(*last_stop - clips[c].end_ms);
        }
        row.turns.push_back(absl::StrCat(missed, " / ", split));
        if (start_errors.empty()) {
          row.starts.push_back("-");
          row.ends.push_back("-");
        } else {
          row.starts.push_back(
              absl::StrFormat("%.0f / %.0f", Mean(start_errors), P90(start_errors)));
          row.ends.push_back(absl::StrFormat("%.0f / %.0f (%+.0f)", Mean(end_errors),
                                             P90(end_errors), end_bias / end_errors.size()));
        }
      }
      row.cpu_us_per_second = cpu / audio_seconds * 1e6;
      for (size_t n = 1; n < noises.size(); ++n) {
        Detector detector(kind, threshold);
        double unused = 0, in_speech = 0;
        int starts = 0;
        for (const VoiceEvent& event : detector.Run(noise_alone[n], &unused, &in_speech)) {
          starts += event.kind == VoiceEvent::kSpeechStarted;
        }
        row.false_fires.push_back(absl::StrFormat(
            "%.1f (%.0f%%)", starts * 60.0 * kRate / noise_length, 100 * in_speech));
      }
      rows.push_back(std::move(row));
    }
  }
  const auto print_table = [&](const char* title, size_t first_noise,
                               std::vector<std::string> Row::*cells) {
    std::printf("\n%s\n\n| detector | threshold |", title);
    for (size_t n = first_noise; n < noises.size(); ++n) {
      std::printf(" %s |", noises[n].name().c_str());
    }
    std::printf("\n| --- | --- |");
    for (size_t n = first_noise; n < noises.size(); ++n) std::printf(" --- |");
    std::printf("\n");
    for (const Row& row : rows) {
      std::printf("%s", row.name.c_str());
      for (const std::string& cell : row.*cells) std::printf(" %s |", cell.c_str());
      std::printf("\n");
    }
  };
  print_table("Turns missed (no start or no stop) / split (more than one start), of the clips", 0,
              &Row::turns);
  print_table("audio_start_ms |error|, mean / p90 (ms)", 0, &Row::starts);
  print_table("audio_end_ms |error|, mean / p90 (ms) (mean signed error)", 0, &Row::ends);
  print_table(
      absl::StrFormat("Noise alone (%d s each, at each SNR's level): speech starts per minute "
                      "(share of the time in a turn)",
                      absl::GetFlag(FLAGS_noise_seconds))
          .c_str(),
      1, &Row::false_fires);
  std::printf(
      "\nCPU per second of audio, pushed 100 ms at a time (us)\n\n| detector | threshold "
      "| us |\n| --- | --- | --- |\n");
  for (const Row& row : rows) std::printf("%s %.0f |\n", row.name.c_str(), row.cpu_us_per_second);
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace omnistage

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return omnistage::bench::Main();
}
