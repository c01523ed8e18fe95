// BatchingEngine: what every built-in engine shares, so that an engine only says
// what one request produces in one step.
//
// - Continuous batching: at most `batch_size` requests run; the others wait in
//   FIFO order and are admitted at the start of a step when a slot is free. A
//   request is admitted only once its generator is Ready() (e.g. has some input),
//   so a request waiting for its first streamed chunk holds no slot; once running
//   it keeps its slot (as a real engine keeps its KV cache) until it finishes or
//   is aborted.
// - Streamed input: text and token payloads are concatenated per kind in arrival
//   order into a RequestInput, so generators cannot see how input was chunked.
//   A generator that must read payloads in order across kinds (the listener:
//   audio, with text between it) takes them one by one instead
//   (RequestGenerator::TakePayload); keeping its output independent of the
//   chunking is then its own business.
// - Replay (Engine::resume_mode()): a request's whole output is a function of
//   its input and settings only, since its generator sees neither its batch
//   mates nor how its input was chunked (above), and must be deterministic in
//   what it sees (RequestGenerator). A lost request can therefore run again on
//   another replica and produce the same output (docs/engines.md#failover,
//   where the test that checks every built-in engine is named).
// - Modelled step time (`step_time_us`, `step_mode` sleep or busy) and the
//   utilities "ping" and "stats". (The fault and benchmark hooks, fail_at_step
//   and the rest, are no part of an engine: fault_injection.h.)
// - A prefix cache, off by default (`prefix_cache_blocks`, `block_tokens`), and
//   modelled prefill (`prefill_us_per_token`): each step, the running
//   requests' new input goes through the cache (prefix_cache.h, in admission
//   order, request_prefill.h), and the step takes step_time plus
//   prefill_us_per_token for every token the cache did not hold. Only the
//   timing and the cache's figures change: a generator never sees the cache,
//   so replay holds with any cache (docs/engines.md, "Prefix cache").
//
// - Playback deadlines (Engine::SetPlaybackDeadline): a request whose listener
//   runs out of audio sooner is admitted to a free slot first (one that has
//   not started playing, the soonest of all; ties keep FIFO order). With
//   `playback_lead_ms` set, a running request whose listener has more audio in
//   hand than that sits out a step while a request with less is ready, so the
//   step is shorter for the ones that need it (step_us_per_request); when no
//   ready request is that close, all step. Only the timing changes (replay
//   holds: a generator never sees step boundaries).
//
// Streamed input that breaks the contract (a payload kind the engine does not
// accept, or input after `last`) fails only that request: its next output is
// finished with FINISH_REASON_ERROR. It comes from another stage or a client, not
// from a bug in this process, so it must not take the worker down.
//
// Thread-safety: as Engine. Validate() reads only state that is constant after
// construction; everything else is called from the busy-loop thread only.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_BASE_BATCHING_ENGINE_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_BASE_BATCHING_ENGINE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/limits.h"
#include "common/prefix_blocks.h"
#include "stage_worker/engines/base/engine.h"
#include "stage_worker/engines/base/engine_params.h"
#include "stage_worker/engines/base/prefix_cache.h"

namespace omnistage {

// The parameters every built-in engine accepts.
struct BatchingOptions {
  enum class StepMode { kSleep, kBusy };

  // Requests running at once (the batch capacity). Parameter `batch_size`.
  int batch_size = 16;
  // Minimum wall time of one Step(), modelling a GPU forward pass.
  // Parameter `step_time_us`.
  absl::Duration step_time = absl::ZeroDuration();
  // kSleep idles through the step time; kBusy spins, burning a core like a
  // host thread that waits on a GPU. Parameter `step_mode` ("sleep", "busy").
  StepMode step_mode = StepMode::kSleep;
  // max_tokens for requests that do not set it. Parameter `max_tokens`.
  uint32_t default_max_tokens = 32;
  // The prefix cache's capacity in blocks; 0: no cache. Parameter
  // `prefix_cache_blocks`.
  int prefix_cache_blocks = 0;
  // Tokens per cache block (common/prefix_blocks.h). Parameter `block_tokens`.
  int block_tokens = kDefaultBlockTokens;
  // Modelled prefill time per input token not found cached, added to the step
  // that prefills it. Parameter `prefill_us_per_token`.
  absl::Duration prefill_per_token = absl::ZeroDuration();
  // Modelled step time per request running in the step, added to step_time:
  // a GPU's forward pass grows with its batch. Parameter `step_us_per_request`.
  absl::Duration step_per_request = absl::ZeroDuration();
  // A running request whose listener has more audio in hand than this sits out
  // a step while one with less is ready; 0: every ready request steps.
  // Parameter `playback_lead_ms`.
  absl::Duration playback_lead = absl::ZeroDuration();
  // Later pieces sized by load: at a full batch, a request whose first output
  // is out and whose input still streams steps once every this many steps,
  // so each later piece of its input is that many steps' worth; with fewer
  // running, fewer steps apart (1 + (this - 1) x running / batch_size,
  // rounded). 1: every step. Parameter `later_piece_steps`, which a request's
  // extra parameter of that name overrides.
  int later_piece_steps = 1;

  // Reads the shared parameters; errors stay in `params` for Finish().
  static BatchingOptions Read(EngineParams* params);
  // The same, an absent key keeping its value in `defaults` (an engine whose
  // requests are heavier than the others' gives a smaller batch_size).
  static BatchingOptions Read(EngineParams* params, const BatchingOptions& defaults);
};

// All input a request has received so far.
struct RequestInput {
  std::string text;             // every text payload, concatenated
  std::vector<int32_t> tokens;  // every token payload, concatenated
  bool complete = false;        // no more input will come
};

// The per-request parameters a generator starts from (already validated).
struct RequestSettings {
  uint32_t max_tokens = 0;
  uint64_t seed = 0;
  std::map<std::string, std::string> extra;
};

// What one request produced in one step.
struct GeneratedStep {
  std::vector<v1::Payload> payloads;
  // FINISH_REASON_UNSPECIFIED while the request goes on.
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  // With FINISH_REASON_ERROR: why (the output's error).
  absl::Status error;
};

// The engine-specific work of one request. Owned by the engine, called on the
// busy-loop thread only.
class RequestGenerator {
 public:
  virtual ~RequestGenerator() = default;
  // Offered each input payload as it arrives (the Add's, then AppendInput's),
  // before it is added to the RequestInput: true when the generator keeps it
  // itself, and the RequestInput does not get it. False by default.
  virtual bool TakePayload(const v1::Payload& payload) { return false; }
  // Whether Step() can make progress with `input` (false: waiting for input).
  virtual bool Ready(const RequestInput& input) const = 0;
  // One step; called only when Ready(). Must be deterministic in `input` and
  // the request's settings, and the output of all its steps together must not
  // depend on when the input arrived (how much of it the earlier steps saw):
  // BatchingEngine promises replay for every engine built on it.
  virtual GeneratedStep Step(const RequestInput& input) = 0;
};

class BatchingEngine : public Engine {
 public:
  // `accepted_kinds`: the input payload kinds the engine takes.
  BatchingEngine(std::string name, std::vector<v1::Payload::KindCase> accepted_kinds,
                 BatchingOptions options);
  ~BatchingEngine() override;

  absl::Status Validate(const EngineRequest& request) const override;
  absl::Status Add(EngineRequest request) override;
  absl::Status AppendInput(const std::string& id, std::vector<v1::Payload> chunks,
                           bool last) override;
  void SetPlaybackDeadline(const std::string& id, absl::Time runs_out) override;
  void Abort(const std::vector<std::string>& ids) override;
  bool HasWork() const override;
  absl::StatusOr<std::vector<v1::RequestOutput>> Step() override;
  absl::StatusOr<google::protobuf::Value> Utility(const std::string& name,
                                                  const google::protobuf::ListValue& args) override;
  int capacity() const override { return options_.batch_size; }
  EngineLoad load() const override {
    return {static_cast<int>(running_.size()), static_cast<int>(waiting_.size())};
  }
  ResumeMode resume_mode() const override { return ResumeMode::kReplay; }
  PrefixCacheLayout prefix_cache() const override;
  PrefixCacheStats prefix_cache_stats() const override;
  std::vector<CacheChange> TakeCacheChanges() override;

  const std::string& name() const { return name_; }

 protected:
  // Creates the generator of a request that passed Validate().
  virtual std::unique_ptr<RequestGenerator> NewGenerator(const RequestSettings& settings) const = 0;

  // Checks one input payload of an accepted kind beyond its kind (an audio
  // format the engine cannot read): a refusal rejects a request in Validate()
  // (at field input[i]) and fails only its request when it comes streamed. OK
  // by default. Must be thread-safe, as Validate().
  virtual absl::Status CheckPayload(const v1::Payload& payload) const { return absl::OkStatus(); }

  // Reads the engine's per-request StageParameters.extra keys through `extra`
  // (which then rejects the keys nobody read). The default reads none.
  virtual void ReadExtra(EngineParams* extra) const {}

 private:
  struct LiveRequest;

  // OK when `payload` is of an accepted kind; `where` describes it for the message.
  absl::Status CheckKind(const v1::Payload& payload, const std::string& where) const;
  // Ends a request with FINISH_REASON_ERROR, reported by the next Step().
  void FailRequest(const std::string& id, const absl::Status& status);
  // Moves ready waiting requests into free batch slots, the soonest playback
  // deadline first, then in FIFO order.
  void Admit();
  // Whether `request` sits out this step (playback_lead): some other ready
  // running request's listener is closer to running out than the lead while
  // its own is not. `urgent`: whether any ready running request's is.
  bool SitsOut(const LiveRequest& request, bool urgent, absl::Time now) const;
  // Whether `request` waits this step for more of its input to gather
  // (later_piece_steps).
  bool WaitsForPiece(const LiveRequest& request) const;
  // Runs the running requests' new input through the cache; the tokens to
  // prefill.
  int64_t Prefill();
  // Returns once the step that began at `start_ns`, prefilled
  // `prefilled_tokens` and stepped `stepped` requests has taken its modelled
  // time.
  void WaitOutStepTime(int64_t start_ns, int64_t prefilled_tokens, int64_t stepped) const;

  const std::string name_;
  const std::vector<v1::Payload::KindCase> accepted_kinds_;
  const BatchingOptions options_;
  // Whether requests' input is prefilled (a cache, or a prefill time).
  const bool prefills_;
  std::unique_ptr<PrefixCache> cache_;  // null: none

  // Every live request (waiting or running), by id.
  absl::flat_hash_map<std::string, std::unique_ptr<LiveRequest>> requests_;
  std::deque<LiveRequest*> waiting_;       // admission order
  std::vector<LiveRequest*> running_;      // at most batch_size, in admission order
  std::vector<v1::RequestOutput> failed_;  // error outputs for the next Step()
  int64_t steps_ = 0;                      // Step() calls so far
  int64_t abort_calls_ = 0;                // Abort() calls so far
  int64_t sat_out_ = 0;                    // request-steps sat out (playback_lead)
  int64_t piece_waits_ = 0;                // request-steps waited (later_piece_steps)
};

// Payload builders for generators and tests.
v1::Payload TextPayload(std::string text);
v1::Payload TokensPayload(const std::vector<int32_t>& ids);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_BASE_BATCHING_ENGINE_H_
