// Fuzz target: what the orchestrator does with a client's Generate or Abort
// request, from the request's protobuf bytes.
//
// Input: one byte of choices (which pipeline; Generate or Abort; for Abort,
// whether to repeat the ids up to the limit of 10,000 or just past it), then a
// serialized GenerateRequest or AbortRequest.
//
// Generate, properties:
// - ValidateGenerateRequest accepts exactly the requests the protos document as
//   valid (checked against a restatement of those rules here); a refusal is
//   INVALID_ARGUMENT, one printable line, naming a field that is wrong;
// - PipelineCore::Generate refuses with that same status, or admits the request
//   and sends stage 0 exactly one AddRequest carrying the prompt and the
//   stage's merged parameters; what the request becomes (NewInFlightRequest)
//   streams only final stages of the asked-for modalities.
// Abort (two requests "a" and "b" in flight, the workers answering at once):
// - more than 10,000 ids: INVALID_ARGUMENT naming request_ids, nothing called,
//   nothing ended;
// - else one result per id, in order: ABORTED for an in-flight id (its stream
//   ended with one ABORT terminal), NOT_FOUND otherwise; at most one worker
//   Abort call per replica, naming only requested ids, each once.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/limits.h"
#include "common/log.h"
#include "fuzz/checking_sink.h"
#include "fuzz/core_fixture.h"
#include "fuzz/fuzz_check.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/message_differencer.h"
#include "orchestrator/core/caller.h"
#include "orchestrator/core/generate_request.h"
#include "orchestrator/config/pipeline_config.h"

namespace omnistage {
namespace fuzz {
namespace {

// Three pipeline shapes: the omni pipeline, one text stage, and a pipeline
// whose only final stage is audio.
const char* const kPipelines[] = {
    R"(limits: {max_prompt_bytes: 64}
stages:
  - {name: thinker, addresses: ["t0:1", "t1:1"], final_output: true, output_modality: text,
     defaults: {max_tokens: 16, extra: {style: plain}}}
  - {name: talker, addresses: ["k0:1"], output_modality: tokens, input_mode: streaming}
  - {name: vocoder, addresses: ["v0:1"], final_output: true, output_modality: audio,
     input_mode: streaming}
)",
    R"(limits: {max_prompt_bytes: 300}
stages:
  - {name: llm, addresses: ["l0:1"], final_output: true, output_modality: text}
)",
    R"(stages:
  - {name: codes, addresses: ["c0:1"], output_modality: tokens, defaults: {seed: 3}}
  - {name: audio, addresses: ["a0:1", "a1:1"], final_output: true, output_modality: audio}
)",
};

const PipelineConfig& Pipeline(int index) {
  static const auto* pipelines = [] {
    auto* parsed = new std::vector<PipelineConfig>();
    for (const char* yaml : kPipelines) {
      absl::StatusOr<PipelineConfig> config = ParsePipelineConfig(yaml);
      FUZZ_CHECK(config.ok(), "a pipeline of this target: ", config.status().ToString());
      parsed->push_back(*std::move(config));
    }
    return parsed;
  }();
  return (*pipelines)[index];
}

void CheckMessage(const absl::Status& status) {
  FUZZ_CHECK(!status.message().empty() && status.message().size() <= 512,
             "an unclear message: ", absl::CHexEscape(status.message()));
  for (char c : status.message()) {
    FUZZ_CHECK(absl::ascii_isprint(static_cast<unsigned char>(c)),
               "a message that is not one printable line: ", absl::CHexEscape(status.message()));
  }
}

bool IsRequestIdChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' ||
         c == '-';
}

// The fields of `request` that break the rules protos/orchestrator.proto
// documents; empty for a valid request.
std::set<std::string> WrongFields(const PipelineConfig& config,
                                  const v1::GenerateRequest& request) {
  std::set<std::string> wrong;
  const std::string& id = request.request_id();
  if (id.size() > kMaxRequestIdBytes || !std::all_of(id.begin(), id.end(), IsRequestIdChar)) {
    wrong.insert("request_id");
  }
  if (request.prompt().empty() || request.prompt().size() > config.max_prompt_bytes) {
    wrong.insert("prompt");
  }
  for (int m : request.output_modalities()) {
    const bool produced = std::any_of(
        config.stages.begin(), config.stages.end(),
        [m](const StageConfig& s) { return s.final_output && s.output_modality == m; });
    if (!produced) wrong.insert("output_modalities");
  }
  if (request.has_priority() && (request.priority() < 0 || request.priority() > kMaxPriority)) {
    wrong.insert("priority");
  }
  std::set<int> seen;
  for (const v1::StageParameters& p : request.stage_params()) {
    const bool max_tokens_ok =
        !p.has_max_tokens() || (p.max_tokens() >= 1 && p.max_tokens() <= kMaxTokensLimit);
    const bool temperature_ok = !p.has_temperature() || (std::isfinite(p.temperature()) &&
                                                         p.temperature() >= 0 &&
                                                         p.temperature() <= kMaxTemperature);
    if (p.stage_id() < 0 || p.stage_id() >= static_cast<int>(config.stages.size()) ||
        !seen.insert(p.stage_id()).second || !max_tokens_ok || !temperature_ok) {
      wrong.insert("stage_params");
    }
  }
  return wrong;
}

void CheckInFlight(const PipelineConfig& config, const v1::GenerateRequest& request) {
  std::unique_ptr<InFlightRequest> r =
      NewInFlightRequest(config, request, "id", nullptr, absl::UnixEpoch());
  const int stages = static_cast<int>(config.stages.size());
  FUZZ_CHECK(static_cast<int>(r->stages.size()) == stages &&
                 static_cast<int>(r->params.size()) == stages,
             "an in-flight request sized for ", r->stages.size(), " stages");
  int last = -1;
  for (int s = 0; s < stages; ++s) {
    FUZZ_CHECK(r->params[s].stage_id() == s, "stage ", s, " runs with the parameters of stage ",
               r->params[s].stage_id());
    if (!r->to_client[s]) continue;
    last = s;
    const StageConfig& stage = config.stages[s];
    const auto& wanted = request.output_modalities();
    FUZZ_CHECK(stage.final_output && (wanted.empty() || std::find(wanted.begin(), wanted.end(),
                                                                  stage.output_modality) !=
                                                            wanted.end()),
               "stage ", s, " streams to a client that did not ask for it");
  }
  FUZZ_CHECK(last >= 0 && last == r->last_stage, "a request that streams nothing (last stage ",
             r->last_stage, ")");
}

void FuzzGenerate(const PipelineConfig& config, const uint8_t* data, size_t size) {
  v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  const absl::Status status = ValidateGenerateRequest(config, request);
  const std::set<std::string> wrong = WrongFields(config, request);
  FUZZ_CHECK(status.ok() == wrong.empty(), "validation says ", status.ToString(),
             " but the documented rules say ", wrong.empty() ? "valid" : *wrong.begin());

  CoreFixture fixture(config);
  auto sink = std::make_shared<CheckingSink>("Generate");
  fixture.Generate(request, sink);
  if (!status.ok()) {
    FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, status.ToString());
    CheckMessage(status);
    const std::string field(status.message().substr(
        0, status.message().find_first_not_of("abcdefghijklmnopqrstuvwxyz_")));
    FUZZ_CHECK(wrong.count(field) > 0, "the message names '", field,
               "', which is not wrong: ", status.message());
    FUZZ_CHECK(sink->failed() && sink->failure() == status,
               "the core did not refuse as validation did: ", sink->failure().ToString());
    FUZZ_CHECK(fixture.log().empty(), "a refused request reached a worker: ", fixture.log()[0]);
    return;
  }
  CheckInFlight(config, request);
  FUZZ_CHECK(sink->started(), "a valid request was not admitted: ", sink->failure().ToString());
  FUZZ_CHECK(request.request_id().empty() || sink->id() == request.request_id(),
             "admitted as ", sink->id(), ", asked for ", request.request_id());
  std::vector<const v1::AddRequest*> adds;
  for (int r = 0; r < fixture.replicas(0); ++r) {
    for (const v1::AddRequest& add : fixture.replica(0, r).adds()) adds.push_back(&add);
  }
  FUZZ_CHECK(adds.size() == 1 && fixture.log().size() == 1, "admitting sent ",
             fixture.log().size(), " commands");
  const v1::AddRequest& add = *adds[0];
  FUZZ_CHECK(add.request_id() == sink->id() && add.input_complete() && add.input_size() == 1 &&
                 add.input(0).text().text() == request.prompt(),
             "stage 0 was not sent the prompt: ", add.ShortDebugString());
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(
                 add.params(), StageParamsFor(config, request, 0)),
             "stage 0 runs with ", add.params().ShortDebugString());
}

// `repeat` of FuzzAbort: 0 keeps the ids as parsed, 1 repeats them up to the
// limit, 2 one past it.
constexpr int kRepeatPastLimit = 2;

void FuzzAbort(const PipelineConfig& config, int repeat, const uint8_t* data, size_t size) {
  v1::AbortRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  if (repeat != 0 && request.request_ids_size() > 0) {
    const int target = kMaxAbortIdsPerCall + (repeat == kRepeatPastLimit ? 1 : 0);
    for (int i = 0; request.request_ids_size() < target; ++i) {
      request.add_request_ids(std::string(request.request_ids(i)));
    }
    while (request.request_ids_size() > target) request.mutable_request_ids()->RemoveLast();
  }
  CoreFixture fixture(config);
  std::map<std::string, std::shared_ptr<CheckingSink>> in_flight;
  for (const char* id : {"a", "b"}) {
    v1::GenerateRequest generate;
    generate.set_request_id(id);
    generate.set_prompt("x");
    auto sink = std::make_shared<CheckingSink>(id);
    fixture.Generate(generate, sink);
    FUZZ_CHECK(sink->started(), id, " not admitted: ", sink->failure().ToString());
    in_flight[id] = sink;
  }
  const size_t commands = fixture.log().size();

  int calls = 0;
  absl::StatusOr<v1::AbortResponse> result = absl::UnknownError("not answered");
  fixture.Abort(request, absl::InfiniteFuture(), [&](absl::StatusOr<v1::AbortResponse> r) {
    ++calls;
    result = std::move(r);
  });
  FUZZ_CHECK(calls == 1, "Abort answered ", calls, " times");
  const std::set<std::string> requested(request.request_ids().begin(),
                                        request.request_ids().end());
  if (request.request_ids_size() > kMaxAbortIdsPerCall) {
    FUZZ_CHECK(result.status().code() == absl::StatusCode::kInvalidArgument &&
                   absl::StartsWith(result.status().message(), "request_ids"),
               "too many ids: ", result.status().ToString());
    CheckMessage(result.status());
    FUZZ_CHECK(fixture.log().size() == commands, "a refused Abort called a worker");
    for (const auto& [id, sink] : in_flight) FUZZ_CHECK(!sink->ended(), id, " ended");
    return;
  }
  FUZZ_CHECK(result.ok(), "Abort failed: ", result.status().ToString());
  FUZZ_CHECK(result->results_size() == request.request_ids_size(), result->results_size(),
             " results for ", request.request_ids_size(), " ids");
  for (int i = 0; i < request.request_ids_size(); ++i) {
    const v1::AbortResult& r = result->results(i);
    const std::string& id = request.request_ids(i);
    FUZZ_CHECK(r.request_id() == id, "result ", i, " is for '", r.request_id(), "'");
    const bool known = in_flight.count(id) > 0;
    FUZZ_CHECK(r.outcome() == (known ? v1::AbortResult::OUTCOME_ABORTED
                                     : v1::AbortResult::OUTCOME_NOT_FOUND),
               "'", id, "': ", v1::AbortResult::Outcome_Name(r.outcome()));
  }
  for (const auto& [id, sink] : in_flight) {
    const bool aborted = requested.count(id) > 0;
    FUZZ_CHECK(sink->finished() == aborted &&
                   (!aborted || sink->terminal().finish_reason() == v1::FINISH_REASON_ABORT),
               id, (aborted ? " was not aborted" : " was aborted unasked"));
  }
  std::set<std::string> called;  // "<stage>.<replica>"
  for (size_t i = commands; i < fixture.log().size(); ++i) {
    const std::string& line = fixture.log()[i];
    const size_t space = line.find(' ');
    FUZZ_CHECK(absl::EndsWith(line.substr(0, space), ".abort"), "Abort sent ", line);
    FUZZ_CHECK(called.insert(line.substr(0, line.find(".abort"))).second,
               "a second Abort call to one replica: ", line);
    const std::string ids = line.substr(space + 2, line.size() - space - 3);  // Inside [...].
    std::set<std::string> seen;
    for (absl::string_view id : absl::StrSplit(ids, ',')) {
      FUZZ_CHECK(in_flight.count(std::string(id)) > 0 && requested.count(std::string(id)) > 0,
                 "a worker was asked to abort '", id, "'");
      FUZZ_CHECK(seen.insert(std::string(id)).second, "'", id, "' twice in ", line);
    }
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace omnistage

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  omnistage::InitLogging({"fuzz", omnistage::LogFormat::kText, omnistage::LogLevel::kError});
  // Protobuf logs every string field with bad UTF-8 it refuses to parse.
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char*, int,
                                     const std::string&) {});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t choices = data[0];
  const omnistage::PipelineConfig& config = omnistage::fuzz::Pipeline(choices % 3);
  if ((choices & 0x4) == 0) {
    omnistage::fuzz::FuzzGenerate(config, data + 1, size - 1);
  } else {
    omnistage::fuzz::FuzzAbort(config, (choices >> 3) % 3, data + 1, size - 1);
  }
  return 0;
}
