#include "stage_worker/engines/base/batching_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/error_proto.h"
#include "common/field_error.h"
#include "stage_worker/engines/base/request_prefill.h"

namespace omnistage {
namespace {

constexpr int kMaxBatchSize = 65536;
// About 16M tokens at 16 tokens a block: more than any GPU's KV cache holds.
constexpr int kMaxPrefixCacheBlocks = 1 << 20;
constexpr absl::Duration kMaxPrefillPerToken = absl::Seconds(1);
constexpr absl::Duration kMaxStepPerRequest = absl::Seconds(1);
constexpr absl::Duration kMaxPlaybackLead = absl::Seconds(3600);
constexpr int kMaxLaterPieceSteps = 1000;
constexpr char kLaterPieceSteps[] = "later_piece_steps";

std::string KindName(v1::Payload::KindCase kind) {
  switch (kind) {
    case v1::Payload::kText:
      return "text";
    case v1::Payload::kTokens:
      return "tokens";
    case v1::Payload::kAudio:
      return "audio";
    case v1::Payload::kRaw:
      return "raw";
    case v1::Payload::KIND_NOT_SET:
      break;
  }
  return "empty (no kind set)";
}

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct BatchingEngine::LiveRequest {
  void Append(const v1::Payload& payload) {
    if (prefill.has_value()) prefill->Append(payload);
    if (generator->TakePayload(payload)) return;
    if (payload.has_text()) {
      input.text += payload.text().text();
    } else if (payload.has_tokens()) {
      const auto& ids = payload.tokens().ids();
      input.tokens.insert(input.tokens.end(), ids.begin(), ids.end());
    }
  }

  std::string id;
  RequestInput input;
  std::unique_ptr<RequestGenerator> generator;
  bool running = false;
  std::optional<RequestPrefill> prefill;  // when the engine prefills
  // When its listener runs out of audio; InfinitePast: not playing yet.
  absl::Time runs_out = absl::InfinitePast();
  // Its later_piece_steps, the step it last stepped in, and whether it has
  // produced output yet (its first piece is out).
  int later_piece_steps = 1;
  int64_t last_step = 0;
  bool produced = false;
};

BatchingOptions BatchingOptions::Read(EngineParams* params) {
  return Read(params, BatchingOptions());
}

BatchingOptions BatchingOptions::Read(EngineParams* params, const BatchingOptions& defaults) {
  BatchingOptions o = defaults;
  o.batch_size = static_cast<int>(params->Int("batch_size", o.batch_size, 1, kMaxBatchSize));
  o.step_time = params->DurationUs("step_time_us", o.step_time, absl::Seconds(60));
  o.step_mode = params->Enum("step_mode", "sleep", {"sleep", "busy"}) == "busy" ? StepMode::kBusy
                                                                                : StepMode::kSleep;
  o.default_max_tokens =
      static_cast<uint32_t>(params->Int("max_tokens", o.default_max_tokens, 1, kMaxTokensLimit));
  o.prefix_cache_blocks = static_cast<int>(
      params->Int("prefix_cache_blocks", o.prefix_cache_blocks, 0, kMaxPrefixCacheBlocks));
  o.block_tokens =
      static_cast<int>(params->Int("block_tokens", o.block_tokens, 1, kMaxBlockTokens));
  o.prefill_per_token =
      params->DurationUs("prefill_us_per_token", o.prefill_per_token, kMaxPrefillPerToken);
  o.step_per_request =
      params->DurationUs("step_us_per_request", o.step_per_request, kMaxStepPerRequest);
  o.playback_lead =
      absl::Milliseconds(params->Int("playback_lead_ms", absl::ToInt64Milliseconds(o.playback_lead),
                                     0, absl::ToInt64Milliseconds(kMaxPlaybackLead)));
  o.later_piece_steps =
      static_cast<int>(params->Int(kLaterPieceSteps, o.later_piece_steps, 1, kMaxLaterPieceSteps));
  return o;
}

v1::Payload TextPayload(std::string text) {
  v1::Payload payload;
  payload.mutable_text()->set_text(std::move(text));
  return payload;
}

v1::Payload TokensPayload(const std::vector<int32_t>& ids) {
  v1::Payload payload;
  payload.mutable_tokens()->mutable_ids()->Add(ids.begin(), ids.end());
  return payload;
}

BatchingEngine::BatchingEngine(std::string name, std::vector<v1::Payload::KindCase> accepted_kinds,
                               BatchingOptions options)
    : name_(std::move(name)),
      accepted_kinds_(std::move(accepted_kinds)),
      options_(options),
      prefills_(options.prefix_cache_blocks > 0 ||
                options.prefill_per_token > absl::ZeroDuration()),
      cache_(options.prefix_cache_blocks > 0
                 ? std::make_unique<PrefixCache>(options.prefix_cache_blocks, options.block_tokens)
                 : nullptr) {}

BatchingEngine::~BatchingEngine() = default;

absl::Status BatchingEngine::CheckKind(const v1::Payload& payload, const std::string& where) const {
  v1::Payload::KindCase kind = payload.kind_case();
  if (std::find(accepted_kinds_.begin(), accepted_kinds_.end(), kind) != accepted_kinds_.end()) {
    absl::Status status = CheckPayload(payload);
    if (status.ok()) return status;
    return absl::Status(status.code(),
                        absl::StrCat("engine ", name_, ": ", where, ": ", status.message()));
  }
  std::vector<std::string> accepted;
  for (v1::Payload::KindCase k : accepted_kinds_) accepted.push_back(KindName(k));
  return absl::InvalidArgumentError(absl::StrCat("engine ", name_, ": ", where, " is ",
                                                 KindName(kind), ", but this engine accepts ",
                                                 absl::StrJoin(accepted, " and ")));
}

absl::Status BatchingEngine::Validate(const EngineRequest& request) const {
  if (request.id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("engine ", name_, ": empty request id"));
  }
  if (request.params.has_max_tokens() &&
      (request.params.max_tokens() < 1 || request.params.max_tokens() > kMaxTokensLimit)) {
    return AtField(absl::InvalidArgumentError(
                       absl::StrCat("engine ", name_, ": max_tokens must be in [1, ",
                                    kMaxTokensLimit, "], got ", request.params.max_tokens())),
                   "params.max_tokens");
  }
  for (size_t i = 0; i < request.input.size(); ++i) {
    absl::Status status = CheckKind(request.input[i], absl::StrCat("input payload ", i));
    if (!status.ok()) return AtField(status, absl::StrCat("input[", i, "]"));
  }
  EngineParams extra(name_, {request.params.extra().begin(), request.params.extra().end()},
                     "extra parameter");
  extra.Int(kLaterPieceSteps, options_.later_piece_steps, 1, kMaxLaterPieceSteps);
  ReadExtra(&extra);
  return AtField(extra.Finish(), "params.extra");
}

absl::Status BatchingEngine::Add(EngineRequest request) {
  // The worker validates before queueing; failing here means it did not, which is
  // a bug worth stopping for.
  absl::Status status = Validate(request);
  if (!status.ok()) return status;
  if (requests_.contains(request.id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("engine ", name_, ": request '", request.id, "' already exists"));
  }
  auto live = std::make_unique<LiveRequest>();
  live->id = request.id;
  if (prefills_) live->prefill.emplace(options_.block_tokens, cache_ != nullptr);
  RequestSettings settings;
  settings.max_tokens =
      request.params.has_max_tokens() ? request.params.max_tokens() : options_.default_max_tokens;
  settings.seed = request.params.has_seed() ? request.params.seed() : 0;
  settings.extra = {request.params.extra().begin(), request.params.extra().end()};
  // The base's own: the generator never sees it (validated above).
  if (auto steps = settings.extra.find(kLaterPieceSteps); steps != settings.extra.end()) {
    EngineParams own(name_, {*steps}, "extra parameter");
    live->later_piece_steps = static_cast<int>(
        own.Int(kLaterPieceSteps, options_.later_piece_steps, 1, kMaxLaterPieceSteps));
    settings.extra.erase(steps);
  } else {
    live->later_piece_steps = options_.later_piece_steps;
  }
  live->generator = NewGenerator(settings);
  for (const v1::Payload& payload : request.input) live->Append(payload);
  live->input.complete = request.input_complete;
  waiting_.push_back(live.get());
  requests_.emplace(request.id, std::move(live));
  return absl::OkStatus();
}

absl::Status BatchingEngine::AppendInput(const std::string& id, std::vector<v1::Payload> chunks,
                                         bool last) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return absl::OkStatus();  // finished or aborted
  LiveRequest& request = *it->second;
  if (request.input.complete) {
    FailRequest(id, absl::FailedPreconditionError(
                        absl::StrCat("engine ", name_, ": input for request '", id,
                                     "' arrived after its input was complete")));
    return absl::OkStatus();
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    absl::Status status =
        CheckKind(chunks[i], absl::StrCat("streamed input chunk ", i, " of request '", id, "'"));
    if (!status.ok()) {
      FailRequest(id, status);
      return absl::OkStatus();
    }
  }
  for (const v1::Payload& chunk : chunks) request.Append(chunk);
  if (last) request.input.complete = true;
  return absl::OkStatus();
}

void BatchingEngine::FailRequest(const std::string& id, const absl::Status& status) {
  Abort({id});
  v1::RequestOutput& output = failed_.emplace_back();
  output.set_request_id(id);
  output.set_finished(true);
  output.set_finish_reason(v1::FINISH_REASON_ERROR);
  *output.mutable_error() = ErrorProto(status);
}

void BatchingEngine::SetPlaybackDeadline(const std::string& id, absl::Time runs_out) {
  auto it = requests_.find(id);
  if (it != requests_.end()) it->second->runs_out = runs_out;
}

void BatchingEngine::Abort(const std::vector<std::string>& ids) {
  ++abort_calls_;
  for (const std::string& id : ids) {
    failed_.erase(
        std::remove_if(failed_.begin(), failed_.end(),
                       [&](const v1::RequestOutput& output) { return output.request_id() == id; }),
        failed_.end());
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    LiveRequest* request = it->second.get();
    if (request->running) {
      running_.erase(std::find(running_.begin(), running_.end(), request));
    } else {
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), request));
    }
    requests_.erase(it);
  }
}

bool BatchingEngine::HasWork() const {
  if (!failed_.empty()) return true;
  for (const LiveRequest* request : running_) {
    if (request->generator->Ready(request->input)) return true;
  }
  if (running_.size() >= static_cast<size_t>(options_.batch_size)) return false;
  for (const LiveRequest* request : waiting_) {
    if (request->generator->Ready(request->input)) return true;
  }
  return false;
}

void BatchingEngine::Admit() {
  const size_t slots = static_cast<size_t>(options_.batch_size) - running_.size();
  if (slots == 0 || waiting_.empty()) return;
  std::vector<LiveRequest*> ready;
  for (LiveRequest* request : waiting_) {
    if (request->generator->Ready(request->input)) ready.push_back(request);
  }
  if (ready.size() > slots) {
    // The soonest deadline first; FIFO among equals (one not playing yet is
    // InfinitePast, before any that plays).
    std::stable_sort(ready.begin(), ready.end(), [](const LiveRequest* a, const LiveRequest* b) {
      return a->runs_out < b->runs_out;
    });
    ready.resize(slots);
  }
  if (ready.empty()) return;
  for (LiveRequest* request : ready) {
    request->running = true;
    running_.push_back(request);
  }
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(),
                                [](const LiveRequest* request) { return request->running; }),
                 waiting_.end());
}

bool BatchingEngine::SitsOut(const LiveRequest& request, bool urgent, absl::Time now) const {
  return urgent && request.runs_out - now > options_.playback_lead;
}

bool BatchingEngine::WaitsForPiece(const LiveRequest& request) const {
  // The first piece goes as soon as it can, and so does the end.
  if (request.later_piece_steps <= 1 || !request.produced || request.input.complete) return false;
  const double load = static_cast<double>(running_.size()) / options_.batch_size;
  const int64_t apart = 1 + std::llround((request.later_piece_steps - 1) * std::min(1.0, load));
  return steps_ - request.last_step < apart;
}

absl::StatusOr<std::vector<v1::RequestOutput>> BatchingEngine::Step() {
  ++steps_;
  const int64_t start_ns = SteadyNowNs();

  std::vector<v1::RequestOutput> outputs = std::move(failed_);
  failed_.clear();
  Admit();
  const int64_t prefilled = Prefill();
  const absl::Time now = absl::Now();
  bool urgent = false;
  if (options_.playback_lead > absl::ZeroDuration()) {
    for (const LiveRequest* request : running_) {
      if (request->runs_out - now <= options_.playback_lead &&
          request->generator->Ready(request->input)) {
        urgent = true;
        break;
      }
    }
  }
  size_t kept = 0;
  int64_t stepped = 0;
  for (LiveRequest* request : running_) {
    if (!request->generator->Ready(request->input)) {
      running_[kept++] = request;
      continue;
    }
    if (SitsOut(*request, urgent, now)) {
      ++sat_out_;
      running_[kept++] = request;
      continue;
    }
    if (WaitsForPiece(*request)) {
      ++piece_waits_;
      running_[kept++] = request;
      continue;
    }
    ++stepped;
    request->last_step = steps_;
    GeneratedStep step = request->generator->Step(request->input);
    if (!step.payloads.empty()) request->produced = true;
    const bool finished = step.finish_reason != v1::FINISH_REASON_UNSPECIFIED;
    if (!step.payloads.empty() || finished) {
      v1::RequestOutput& output = outputs.emplace_back();
      output.set_request_id(request->id);
      for (v1::Payload& payload : step.payloads) *output.add_payloads() = std::move(payload);
      output.set_finished(finished);
      output.set_finish_reason(step.finish_reason);
      if (step.finish_reason == v1::FINISH_REASON_ERROR) {
        *output.mutable_error() = ErrorProto(step.error);
      }
    }
    if (finished) {
      requests_.erase(requests_.find(request->id));
    } else {
      running_[kept++] = request;
    }
  }
  running_.resize(kept);

  WaitOutStepTime(start_ns, prefilled, stepped);
  return outputs;
}

int64_t BatchingEngine::Prefill() {
  if (!prefills_) return 0;
  int64_t prefilled = 0;
  for (LiveRequest* request : running_) {
    prefilled += request->prefill->Run(cache_.get(), request->input.complete);
  }
  return prefilled;
}

void BatchingEngine::WaitOutStepTime(int64_t start_ns, int64_t prefilled_tokens,
                                     int64_t stepped) const {
  const absl::Duration step_time = options_.step_time +
                                   options_.prefill_per_token * prefilled_tokens +
                                   options_.step_per_request * stepped;
  if (step_time <= absl::ZeroDuration()) return;
  const int64_t deadline_ns = start_ns + absl::ToInt64Nanoseconds(step_time);
  if (options_.step_mode == BatchingOptions::StepMode::kBusy) {
    while (SteadyNowNs() < deadline_ns) {
    }
    return;
  }
  const int64_t left_ns = deadline_ns - SteadyNowNs();
  if (left_ns > 0) absl::SleepFor(absl::Nanoseconds(left_ns));
}

PrefixCacheLayout BatchingEngine::prefix_cache() const {
  return cache_ != nullptr ? cache_->layout() : PrefixCacheLayout();
}

PrefixCacheStats BatchingEngine::prefix_cache_stats() const {
  return cache_ != nullptr ? cache_->stats() : PrefixCacheStats();
}

std::vector<CacheChange> BatchingEngine::TakeCacheChanges() {
  return cache_ != nullptr ? cache_->TakeChanges() : std::vector<CacheChange>();
}

absl::StatusOr<google::protobuf::Value> BatchingEngine::Utility(
    const std::string& name, const google::protobuf::ListValue& args) {
  google::protobuf::Value result;
  if (name == "ping") {
    result.set_string_value("pong");
  } else if (name == "stats") {
    auto& fields = *result.mutable_struct_value()->mutable_fields();
    fields["running"].set_number_value(static_cast<double>(running_.size()));
    fields["waiting"].set_number_value(static_cast<double>(waiting_.size()));
    fields["steps"].set_number_value(static_cast<double>(steps_));
    // Each worker Abort RPC is one engine Abort call (tests count them).
    fields["abort_calls"].set_number_value(static_cast<double>(abort_calls_));
    // Request-steps sat out for a listener with audio in hand (playback_lead_ms).
    fields["sat_out"].set_number_value(static_cast<double>(sat_out_));
    // Request-steps waited for a later piece to gather (later_piece_steps).
    fields["piece_waits"].set_number_value(static_cast<double>(piece_waits_));
    fields["capacity"].set_number_value(options_.batch_size);
    if (cache_ != nullptr) {
      const PrefixCacheStats cache = cache_->stats();
      fields["prefix_cache_blocks"].set_number_value(cache.blocks);
      fields["prefix_cache_capacity_blocks"].set_number_value(options_.prefix_cache_blocks);
      fields["prefix_cache_hit_tokens"].set_number_value(static_cast<double>(cache.hit_tokens));
      fields["prefix_cache_miss_tokens"].set_number_value(static_cast<double>(cache.miss_tokens));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("engine ", name_, ": unknown utility '", name, "' (known: ping, stats)"));
  }
  return result;
}

}  // namespace omnistage
