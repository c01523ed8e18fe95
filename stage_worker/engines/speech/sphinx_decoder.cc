#include "stage_worker/engines/speech/sphinx_decoder.h"

#include <pocketsphinx.h>
#include <sys/stat.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

constexpr char kSearch[] = "listener";
constexpr char kPackage[] = "on Debian it comes with the package pocketsphinx-en-us";

bool Exists(const std::string& path, bool folder) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && (folder ? S_ISDIR(info.st_mode) : S_ISREG(info.st_mode));
}

absl::Status Missing(const std::string& what, const std::string& path) {
  return absl::FailedPreconditionError(absl::StrCat("engine listener: the pocketsphinx ", what, " ",
                                                    path, " is missing (", kPackage, ")"));
}

// A word of a hypothesis that is speech: not a filler pocketsphinx may report
// ("<sil>", "[NOISE]", "<s>").
bool IsWord(const std::string& word) {
  return !word.empty() && word.front() != '<' && word.front() != '[';
}

// "word(2)" (the dictionary's second pronunciation) -> "word".
std::string BaseWord(absl::string_view word) {
  const size_t paren = word.find('(');
  return std::string(paren == absl::string_view::npos ? word : word.substr(0, paren));
}

int64_t Milliseconds(int64_t samples) { return samples * 1000 / kSphinxSampleRateHz; }

}  // namespace

SphinxDecoder::SphinxDecoder(ps_decoder_s* decoder, const std::vector<float>* cmn_init)
    : decoder_(decoder), cmn_init_(cmn_init) {
  cmd_ln_t* config = ps_get_config(decoder);
  const int32 frame_rate = cmd_ln_int32_r(config, "-frate");
  if (frame_rate > 0) frame_samples_ = kSphinxSampleRateHz / frame_rate;
  prespeech_frames_ = cmd_ln_int32_r(config, "-vad_prespeech");
}

SphinxDecoder::~SphinxDecoder() { ps_free(decoder_); }

absl::Status SphinxDecoder::Start() {
  // A new stream: the front end's estimates of the channel (its noise level,
  // which its voice activity detector and noise removal go by) start again,
  // as the cepstral mean does, so nothing of the requests before carries over.
  if (ps_start_stream(decoder_) < 0) {
    return absl::InternalError("engine listener: pocketsphinx did not start a stream");
  }
  feat_t* features = ps_get_feat(decoder_);
  cmn_live_set(features->cmn_struct, cmn_init_->data());
  samples_fed_ = 0;
  return StartUtterance();
}

absl::Status SphinxDecoder::StartUtterance() {
  if (ps_start_utt(decoder_) < 0) {
    return absl::InternalError("engine listener: pocketsphinx did not start an utterance");
  }
  in_utterance_ = true;
  heard_speech_ = false;
  in_speech_ = false;
  utterance_start_ = samples_fed_;
  speech_start_ = -1;
  return absl::OkStatus();
}

absl::Status SphinxDecoder::Feed(absl::Span<const int16_t> samples,
                                 std::vector<HeardUtterance>* heard) {
  // A frame at a time, so that the start of speech the detector hears is
  // placed within a frame.
  for (size_t at = 0; at < samples.size(); at += static_cast<size_t>(frame_samples_)) {
    const absl::Span<const int16_t> frame = samples.subspan(at, frame_samples_);
    if (ps_process_raw(decoder_, frame.data(), frame.size(), /*no_search=*/FALSE,
                       /*full_utt=*/FALSE) < 0) {
      return absl::InternalError("engine listener: pocketsphinx failed to decode audio");
    }
    samples_fed_ += static_cast<int64_t>(frame.size());
    const bool in_speech = ps_get_in_speech(decoder_) != 0;
    if (in_speech && speech_start_ < 0) {
      // The front end keeps the frames before its trigger: the utterance's
      // first frame is that many (and the one that triggered) back.
      speech_start_ = std::max(utterance_start_, samples_fed_ - int64_t{prespeech_frames_ + 1} *
                                                                   frame_samples_);
    }
    in_speech_ = in_speech;
  }
  // The continuous pattern of pocketsphinx's own examples: an utterance ends
  // when its voice activity detector hears silence after speech.
  if (in_speech_) heard_speech_ = true;
  if (in_speech_ || !heard_speech_) return absl::OkStatus();
  return EndUtterance(/*more=*/true, heard);
}

HeardUtterance SphinxDecoder::TimedWords() {
  HeardUtterance words;
  // Segment frames count every frame the decoder ever made, dropped ones
  // included (so they do not start at 0 for a request or an utterance); the
  // first segment (the silence "<s>") starts at the utterance's first kept
  // frame, which the detector's trigger placed in this request's audio.
  bool anchored = false;
  int anchor_frame = 0;
  const int64_t anchor_sample = speech_start_ >= 0 ? speech_start_ : utterance_start_;
  for (ps_seg_t* seg = ps_seg_iter(decoder_); seg != nullptr; seg = ps_seg_next(seg)) {
    int first = 0, last = 0;
    ps_seg_frames(seg, &first, &last);
    if (!anchored) {
      anchored = true;
      anchor_frame = first;
    }
    const char* text = ps_seg_word(seg);
    if (text == nullptr || !IsWord(text)) continue;
    const int64_t start = anchor_sample + int64_t{first - anchor_frame} * frame_samples_;
    const int64_t end = anchor_sample + int64_t{last + 1 - anchor_frame} * frame_samples_;
    words.push_back(
        {BaseWord(text), Milliseconds(start), Milliseconds(std::min(end, samples_fed_))});
  }
  return words;
}

absl::Status SphinxDecoder::EndUtterance(bool more, std::vector<HeardUtterance>* heard) {
  if (in_utterance_) {
    in_utterance_ = false;
    if (ps_end_utt(decoder_) < 0) {
      return absl::InternalError("engine listener: pocketsphinx failed to end an utterance");
    }
    HeardUtterance words = TimedWords();
    if (!words.empty()) heard->push_back(std::move(words));
  }
  heard_speech_ = false;
  if (!more) return absl::OkStatus();
  return StartUtterance();
}

void SphinxDecoder::Release() {
  if (in_utterance_) ps_end_utt(decoder_);
  in_utterance_ = false;
  heard_speech_ = false;
}

absl::StatusOr<std::shared_ptr<SphinxModel>> SphinxModel::Load(const SphinxOptions& options) {
  if (!Exists(absl::StrCat(options.acoustic_model, "/mdef"), /*folder=*/false)) {
    return Missing("acoustic model (a folder with mdef, means, ...)", options.acoustic_model);
  }
  if (!Exists(options.language_model, /*folder=*/false)) {
    return Missing("language model", options.language_model);
  }
  if (!Exists(options.dictionary, /*folder=*/false)) {
    return Missing("dictionary", options.dictionary);
  }
  // pocketsphinx logs every step of loading to stderr; its failures come back
  // as our own messages.
  cmd_ln_t* config =
      cmd_ln_init(nullptr, ps_args(), TRUE, "-hmm", options.acoustic_model.c_str(), "-dict",
                  options.dictionary.c_str(), "-logfn", "/dev/null", nullptr);
  if (config == nullptr) {
    return absl::FailedPreconditionError("engine listener: pocketsphinx refused its configuration");
  }
  std::shared_ptr<SphinxModel> model(new SphinxModel());
  absl::Status status;
  for (int i = 0; i < options.decoders && status.ok(); ++i) {
    ps_decoder_t* decoder = ps_init(config);
    if (decoder == nullptr) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "engine listener: pocketsphinx could not load the model ", options.acoustic_model,
          " with the dictionary ", options.dictionary, " (", kPackage, ")"));
      break;
    }
    model->all_.emplace_back(new SphinxDecoder(decoder, &model->cmn_init_));
    if (model->language_model_ == nullptr) {
      // Read with the first decoder's log base, which every decoder shares.
      model->language_model_ = ngram_model_read(config, options.language_model.c_str(),
                                                NGRAM_AUTO, ps_get_logmath(decoder));
      if (model->language_model_ == nullptr) {
        status = absl::FailedPreconditionError(
            absl::StrCat("engine listener: pocketsphinx could not read the language model ",
                         options.language_model, " (", kPackage, ")"));
        break;
      }
      const cmn_t* cmn = ps_get_feat(decoder)->cmn_struct;
      model->cmn_init_.resize(static_cast<size_t>(cmn->veclen));
      cmn_live_get(ps_get_feat(decoder)->cmn_struct, model->cmn_init_.data());
      if (!options.cmn_init.empty()) {
        if (options.cmn_init.size() != model->cmn_init_.size()) {
          status = absl::InvalidArgumentError(absl::StrCat(
              "engine listener: parameter cmn_init: expected ", model->cmn_init_.size(),
              " numbers (the model's cepstrum length), got ", options.cmn_init.size()));
          break;
        }
        model->cmn_init_ = options.cmn_init;
      }
    }
    if (ps_set_lm(decoder, kSearch, model->language_model_) < 0 ||
        ps_set_search(decoder, kSearch) < 0) {
      status = absl::FailedPreconditionError(
          absl::StrCat("engine listener: pocketsphinx could not use the language model ",
                       options.language_model));
    }
  }
  cmd_ln_free_r(config);  // the decoders hold their own references
  if (!status.ok()) return status;
  for (const auto& decoder : model->all_) model->free_.push_back(decoder.get());
  return model;
}

SphinxModel::~SphinxModel() {
  all_.clear();  // the decoders first: their searches use the language model
  if (language_model_ != nullptr) ngram_model_free(language_model_);
}

std::shared_ptr<SphinxDecoder> SphinxModel::Acquire() {
  if (free_.empty()) return nullptr;
  SphinxDecoder* decoder = free_.back();
  free_.pop_back();
  std::shared_ptr<SphinxModel> self = shared_from_this();
  return std::shared_ptr<SphinxDecoder>(decoder, [self](SphinxDecoder* released) {
    released->Release();
    self->free_.push_back(released);
  });
}

}  // namespace omnistage
