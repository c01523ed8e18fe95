#include "stage_worker/engines/speech/sphinx_decoder.h"

#include <pocketsphinx.h>
#include <sys/stat.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

void AppendWords(const char* hypothesis, std::vector<std::string>* heard) {
  if (hypothesis == nullptr) return;
  for (absl::string_view word : absl::StrSplit(hypothesis, ' ', absl::SkipEmpty())) {
    if (IsWord(std::string(word))) heard->emplace_back(word);
  }
}

}  // namespace

SphinxDecoder::~SphinxDecoder() { ps_free(decoder_); }

absl::Status SphinxDecoder::Start() {
  feat_t* features = ps_get_feat(decoder_);
  cmn_live_set(features->cmn_struct, cmn_init_->data());
  if (ps_start_utt(decoder_) < 0) {
    return absl::InternalError("engine listener: pocketsphinx did not start an utterance");
  }
  in_utterance_ = true;
  heard_speech_ = false;
  return absl::OkStatus();
}

absl::Status SphinxDecoder::Feed(absl::Span<const int16_t> samples,
                                 std::vector<std::string>* heard) {
  if (ps_process_raw(decoder_, samples.data(), samples.size(), /*no_search=*/FALSE,
                     /*full_utt=*/FALSE) < 0) {
    return absl::InternalError("engine listener: pocketsphinx failed to decode audio");
  }
  // The continuous pattern of pocketsphinx's own examples: an utterance ends
  // when its voice activity detector hears silence after speech.
  const bool in_speech = ps_get_in_speech(decoder_) != 0;
  if (in_speech) heard_speech_ = true;
  if (in_speech || !heard_speech_) return absl::OkStatus();
  return EndUtterance(/*more=*/true, heard);
}

absl::Status SphinxDecoder::EndUtterance(bool more, std::vector<std::string>* heard) {
  if (in_utterance_) {
    in_utterance_ = false;
    if (ps_end_utt(decoder_) < 0) {
      return absl::InternalError("engine listener: pocketsphinx failed to end an utterance");
    }
    AppendWords(ps_get_hyp(decoder_, nullptr), heard);
  }
  heard_speech_ = false;
  if (!more) return absl::OkStatus();
  if (ps_start_utt(decoder_) < 0) {
    return absl::InternalError("engine listener: pocketsphinx did not start an utterance");
  }
  in_utterance_ = true;
  return absl::OkStatus();
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
