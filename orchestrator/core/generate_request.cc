#include "orchestrator/core/generate_request.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/field_error.h"
#include "common/limits.h"
#include "common/modality.h"
#include "orchestrator/core/caller.h"
#include "orchestrator/core/latency_objectives.h"
#include "orchestrator/core/request_id.h"

namespace omnistage {
namespace {

bool IsRequestIdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' ||
         c == '-';
}

absl::Status CheckModalities(const PipelineConfig& config, const v1::GenerateRequest& request) {
  for (int m : request.output_modalities()) {
    if (m == v1::MODALITY_UNSPECIFIED || !v1::Modality_IsValid(m)) {
      return absl::InvalidArgumentError(absl::StrCat("output_modalities: unknown modality ", m));
    }
    const bool produced =
        std::any_of(config.stages.begin(), config.stages.end(),
                    [m](const StageConfig& s) { return s.final_output && s.output_modality == m; });
    if (!produced) {
      return absl::InvalidArgumentError(
          absl::StrCat("output_modalities: no final stage of this pipeline produces ",
                       ModalityName(static_cast<v1::Modality>(m))));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStageParams(const PipelineConfig& config, const v1::GenerateRequest& request) {
  std::vector<bool> seen(config.stages.size(), false);
  for (const v1::StageParameters& p : request.stage_params()) {
    if (p.stage_id() < 0 || p.stage_id() >= static_cast<int>(config.stages.size())) {
      return absl::InvalidArgumentError(absl::StrCat("stage_params: no stage ", p.stage_id(),
                                                     " (the pipeline has ", config.stages.size(),
                                                     ")"));
    }
    if (seen[p.stage_id()]) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage_params: stage ", p.stage_id(), " given twice"));
    }
    seen[p.stage_id()] = true;
    if (p.has_max_tokens() &&
        (p.max_tokens() < 1 || static_cast<int64_t>(p.max_tokens()) > kMaxTokensLimit)) {
      return absl::InvalidArgumentError(absl::StrCat("stage_params[stage ", p.stage_id(),
                                                     "].max_tokens must be in [1, ",
                                                     kMaxTokensLimit, "]"));
    }
    // As for the config's defaults: engines take it as given.
    if (p.has_temperature() && !(p.temperature() >= 0 && p.temperature() <= kMaxTemperature)) {
      return absl::InvalidArgumentError(absl::StrCat("stage_params[stage ", p.stage_id(),
                                                     "].temperature must be a number in [0, ",
                                                     kMaxTemperature, "]"));
    }
  }
  return absl::OkStatus();
}

// Whether `request` gets audio: a final-output audio stage streams to it.
bool GetsAudio(const PipelineConfig& config, const v1::GenerateRequest& request) {
  const auto& wanted = request.output_modalities();
  for (const StageConfig& stage : config.stages) {
    if (stage.final_output && stage.output_modality == v1::MODALITY_AUDIO &&
        (wanted.empty() ||
         std::find(wanted.begin(), wanted.end(), v1::MODALITY_AUDIO) != wanted.end())) {
      return true;
    }
  }
  return false;
}

absl::Status CheckObjectives(const PipelineConfig& config, const v1::GenerateRequest& request) {
  const v1::LatencyObjectives& objectives = request.objectives();
  for (const auto& [name, ms] :
       {std::pair<const char*, uint32_t>{"first_output_ms", objectives.first_output_ms()},
        {"first_audio_ms", objectives.first_audio_ms()},
        {"between_outputs_ms", objectives.between_outputs_ms()}}) {
    if (ms > kMaxObjectiveMs) {
      const std::string field = absl::StrCat("objectives.", name);
      return AtField(
          absl::InvalidArgumentError(absl::StrCat(field, ": ", ms, " ms is more than the ",
                                                  kMaxObjectiveMs, " ms an objective may be")),
          field);
    }
  }
  if (!v1::Criticality_IsValid(objectives.criticality())) {
    return AtField(absl::InvalidArgumentError(
                       absl::StrCat("objectives.criticality: ", objectives.criticality(),
                                    " is none of CRITICAL (1), STANDARD (2) and SHEDDABLE (3)")),
                   "objectives.criticality");
  }
  if (objectives.first_audio_ms() > 0 && !GetsAudio(config, request)) {
    return AtField(absl::InvalidArgumentError(
                       "objectives.first_audio_ms: the request gets no audio (no final-output "
                       "audio stage among its output_modalities)"),
                   "objectives.first_audio_ms");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGenerateRequest(const PipelineConfig& config,
                                     const v1::GenerateRequest& request, bool streamed_input) {
  const std::string& id = request.request_id();
  if (request.has_priority() && (request.priority() < 0 || request.priority() > kMaxPriority)) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority: ", request.priority(), " is not in 0..", kMaxPriority));
  }
  if (id.size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_id is ", id.size(), " bytes; the limit is ", kMaxRequestIdBytes));
  }
  if (!request.on_behalf_of().empty() && streamed_input) {
    return absl::InvalidArgumentError("on_behalf_of: only Generate takes it, not GenerateDuplex");
  }
  if (request.on_behalf_of().size() > kMaxIdentityBytes) {
    return absl::InvalidArgumentError(absl::StrCat("on_behalf_of is ",
                                                   request.on_behalf_of().size(),
                                                   " bytes; the limit is ", kMaxIdentityBytes));
  }
  if (!std::all_of(id.begin(), id.end(), IsRequestIdChar)) {
    return absl::InvalidArgumentError("request_id may contain only letters, digits and . _ : -");
  }
  // That form names the orchestrator holding the request; an Abort landing on
  // another one is forwarded there by it.
  if (OwnerNodeOf(id).has_value()) {
    return absl::InvalidArgumentError(
        "request_id: ids of the form req-<32 hex>.<12 hex> are the ones orchestrators "
        "generate; choose another form or leave request_id empty");
  }
  if (request.session_key().size() > kMaxSessionKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("session_key is ", request.session_key().size(),
                                                   " bytes; the limit is ", kMaxSessionKeyBytes));
  }
  if (request.prompt().empty() && !streamed_input)
    return absl::InvalidArgumentError("prompt is empty");
  if (request.prompt().size() > config.max_prompt_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt is ", request.prompt().size(), " bytes; the limit is ", config.max_prompt_bytes));
  }
  const size_t fields = request.ByteSizeLong() - request.prompt().size();
  if (fields > static_cast<size_t>(kMaxRequestFieldsBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("the request's fields besides the prompt take ",
                                                   fields, " bytes; the limit is ",
                                                   kMaxRequestFieldsBytes));
  }
  if (absl::Status s = CheckModalities(config, request); !s.ok()) return s;
  if (absl::Status s = CheckObjectives(config, request); !s.ok()) return s;
  return CheckStageParams(config, request);
}

absl::Status ValidateInputMessage(const PipelineConfig& config, const v1::GenerateInput& message,
                                  int64_t streamed_before, int64_t* bytes) {
  *bytes = 0;
  if (!message.has_input()) {
    return AtField(absl::InvalidArgumentError(
                       "only the first message of a GenerateDuplex call carries `request`; the "
                       "later ones carry `input`"),
                   "request");
  }
  const v1::InputChunk& chunk = message.input();
  for (int i = 0; i < chunk.payloads_size(); ++i) {
    const v1::Payload& p = chunk.payloads(i);
    const std::string field = absl::StrCat("input.payloads[", i, "]");
    if (p.kind_case() == v1::Payload::KIND_NOT_SET) {
      return AtField(absl::InvalidArgumentError(absl::StrCat(field, " has no content")), field);
    }
    if (!p.has_audio()) continue;
    const v1::AudioChunk& audio = p.audio();
    const int channels = audio.channels() == 0 ? 1 : audio.channels();
    if (channels < 1 || channels > kMaxAudioChannels) {
      return AtField(absl::InvalidArgumentError(
                         absl::StrCat(field, ".audio.channels is ", audio.channels(),
                                      "; it must be in 0..", kMaxAudioChannels, " (0: mono)")),
                     field + ".audio.channels");
    }
    if (audio.sample_rate_hz() < kMinAudioSampleRateHz ||
        audio.sample_rate_hz() > kMaxAudioSampleRateHz) {
      return AtField(absl::InvalidArgumentError(absl::StrCat(
                         field, ".audio.sample_rate_hz is ", audio.sample_rate_hz(),
                         "; it must be in ", kMinAudioSampleRateHz, "..", kMaxAudioSampleRateHz)),
                     field + ".audio.sample_rate_hz");
    }
    if (audio.pcm_s16le().size() % (2 * static_cast<size_t>(channels)) != 0) {
      return AtField(
          absl::InvalidArgumentError(absl::StrCat(
              field, ".audio.pcm_s16le is ", audio.pcm_s16le().size(), " bytes: not whole 16-bit ",
              channels == 1 ? "mono" : absl::StrCat(channels, "-channel"), " samples")),
          field + ".audio.pcm_s16le");
    }
  }
  const int64_t size = static_cast<int64_t>(chunk.ByteSizeLong());
  if (size > config.max_input_chunk_bytes) {
    return AtField(absl::InvalidArgumentError(absl::StrCat(
                       "an input message of ", size, " bytes; limits.max_input_chunk_bytes is ",
                       config.max_input_chunk_bytes)),
                   kInputChunkLimitField);
  }
  if (streamed_before + size > config.max_input_bytes) {
    return AtField(absl::InvalidArgumentError(
                       absl::StrCat("the streamed input reached ", streamed_before + size,
                                    " bytes; limits.max_input_bytes is ", config.max_input_bytes)),
                   kInputBytesLimitField);
  }
  *bytes = size;
  return absl::OkStatus();
}

v1::StageParameters StageParamsFor(const PipelineConfig& config, const v1::GenerateRequest& request,
                                   int stage) {
  v1::StageParameters params = config.stages[stage].defaults;
  params.set_stage_id(stage);
  for (const v1::StageParameters& p : request.stage_params()) {
    if (p.stage_id() != stage) continue;
    if (p.has_max_tokens()) params.set_max_tokens(p.max_tokens());
    if (p.has_seed()) params.set_seed(p.seed());
    if (p.has_temperature()) params.set_temperature(p.temperature());
    for (const auto& [key, value] : p.extra()) (*params.mutable_extra())[key] = value;
  }
  return params;
}

std::unique_ptr<InFlightRequest> NewInFlightRequest(const PipelineConfig& config,
                                                    const v1::GenerateRequest& request,
                                                    const std::string& id,
                                                    std::shared_ptr<ResponseSink> sink,
                                                    absl::Time now) {
  auto r = std::make_unique<InFlightRequest>();
  r->id = id;
  r->sink = std::move(sink);
  r->session_key = request.session_key();
  const int stages = static_cast<int>(config.stages.size());
  r->stages.resize(stages);
  r->to_client.assign(stages, false);
  r->partial_text.resize(stages);
  r->partial_tokens.resize(stages);
  const auto& wanted = request.output_modalities();
  for (int s = 0; s < stages; ++s) {
    const StageConfig& stage = config.stages[s];
    r->to_client[s] =
        stage.final_output && (wanted.empty() || std::find(wanted.begin(), wanted.end(),
                                                           stage.output_modality) != wanted.end());
    if (r->to_client[s]) r->last_stage = s;
    r->params.push_back(StageParamsFor(config, request, s));
  }
  r->wants_audio = GetsAudio(config, request);
  r->objectives = request.objectives();
  r->last_activity = now;
  r->account = RequestAccount(now, config.playback.jitter_buffer);
  return r;
}

}  // namespace omnistage
