// The Engine interface: the plug-in point for model executors in a stage worker.
//
// An engine runs many requests at once and advances all of them by one step per
// Step() call (continuous batching). The worker's busy loop (engine_core.h) is the
// only caller of every method except Validate() and capacity(), so implementations
// need no locking for their request state.
//
//   absl::StatusOr<std::unique_ptr<Engine>> engine =
//       CreateEngine("sim_llm", {{"batch_size", "64"}, {"step_time_us", "2000"}});
//   (*engine)->Add(request);
//   while ((*engine)->HasWork()) auto outputs = (*engine)->Step();
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_BASE_ENGINE_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_BASE_ENGINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"
#include "protos/common.pb.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

// One request as the engine sees it.
struct EngineRequest {
  // Unique among the engine's live requests (the worker makes it unique across
  // sessions).
  std::string id;
  // The input known at Add() time.
  std::vector<v1::Payload> input;
  // False when more input will arrive through AppendInput().
  bool input_complete = true;
  v1::StageParameters params;
  // What the request already produced on a replica that was lost, when it
  // resumes here by continuation (ResumeMode below): one payload per kind (all
  // its text, all its token ids, all its audio, each concatenated), then its
  // raw payloads in order, as AddRequest.produced carries them.
  // Empty otherwise: the worker refuses `produced` for an engine that does not
  // resume by continuation, so other engines never see it.
  std::vector<v1::Payload> produced;
};

// How an engine takes over a request that another replica of its stage lost
// (failover, docs/engines.md#failover). The orchestrator must deliver exactly
// what a fault-free run would have, so it needs to know which of two promises
// the engine keeps:
enum class ResumeMode {
  // Neither: a lost request that had produced anything fails.
  kNone,
  // The output is a function of the request's input and parameters (seed
  // included) alone: not of its batch mates, of how its input was chunked or
  // when streamed input arrived, of step boundaries or timing, nor of the
  // replica. The request runs again from its whole input, and the orchestrator
  // drops the part already delivered, counted per payload kind.
  kReplay,
  // The request arrives with EngineRequest.produced, and the engine produces
  // only what follows it (as a vLLM-style engine appends the tokens it emitted
  // to the prompt and continues).
  kContinuation,
};

// Whether an engine takes a request's input in pieces: an Add with
// input_complete false, then AppendInput() (docs/engines.md, "Streamed input").
enum class StreamedInput {
  // It cannot: the worker refuses such an Add for it.
  kNone,
  // It takes the pieces and starts once the input is complete (an LLM that
  // prefills its whole prompt).
  kWhole,
  // It starts on the first piece and consumes the others as they arrive.
  kIncremental,
};

// How many requests an engine holds: in its batch, and admitted but waiting
// (for a batch slot or for streamed input).
struct EngineLoad {
  int running = 0;
  int waiting = 0;
};

// An engine's prefix cache (docs/engines.md, "Prefix cache"): inputs cut into
// blocks named as common/prefix_blocks.h names them, kept up to a capacity.
struct PrefixCacheLayout {
  // 0: the engine has no prefix cache (and the rest is 0).
  int block_tokens = 0;
  int capacity_blocks = 0;
};
struct PrefixCacheStats {
  int blocks = 0;  // held now
  // Input tokens since the engine started: found cached (a request's leading
  // whole blocks the cache held), and prefilled (the rest).
  int64_t hit_tokens = 0;
  int64_t miss_tokens = 0;
};
// One change to the cache: a block stored, or evicted.
struct CacheChange {
  uint64_t block = 0;
  bool stored = false;
};

class Engine {
 public:
  virtual ~Engine() = default;

  // Checks a request's input and parameters before it is queued: a non-OK status
  // (INVALID_ARGUMENT, with a message naming the bad field and, where it can, the
  // field's path in the AddRequest as common/field_error.h carries it, e.g.
  // "params.extra.voice" or "input[0]") rejects that request only. Thread-safe and
  // side-effect free: called from gRPC threads.
  virtual absl::Status Validate(const EngineRequest& request) const = 0;

  // A second check of a request that passed Validate(), on the busy-loop thread
  // right before Add(), for checks that cannot run on gRPC threads (a Python
  // engine's validate needs the interpreter the loop holds while it steps). A
  // non-OK status rejects that request only, like Validate(); OK by default.
  virtual absl::Status ValidateInLoop(const EngineRequest& request) { return absl::OkStatus(); }
  // True when ValidateInLoop() checks anything: a session's stage defaults are
  // then checked on the loop too before the session opens. Constant.
  virtual bool validates_in_loop() const { return false; }

  // Starts a request that passed Validate(). An error here is fatal for the worker.
  virtual absl::Status Add(EngineRequest request) = 0;

  // More input for a request added with input_complete = false; `last` marks the
  // end of its input. Unknown ids (e.g. already aborted) are ignored. An error is
  // fatal.
  virtual absl::Status AppendInput(const std::string& id, std::vector<v1::Payload> chunks,
                                   bool last) = 0;

  // When request `id`'s listener runs out of audio (the worker's clock): it
  // has played everything the request sent so far by then (docs/engines.md,
  // "Playback deadlines"). A request never given one has not started playing.
  // The engine may order its work by it; nothing by default. Unknown ids are
  // ignored.
  virtual void SetPlaybackDeadline(const std::string& id, absl::Time runs_out) {}

  // Stops requests now: they produce no further output. Unknown ids are ignored.
  virtual void Abort(const std::vector<std::string>& ids) = 0;

  // True when some request can make progress in Step(). A request waiting for
  // streamed input does not count.
  virtual bool HasWork() const = 0;

  // Advances every running request by one step and returns what each produced
  // (only requests with new output or that finished appear). A request's last
  // output has finished = true. An error is fatal for the worker.
  virtual absl::StatusOr<std::vector<v1::RequestOutput>> Step() = 0;

  // Runs an engine-defined operation. An error affects only this call.
  virtual absl::StatusOr<google::protobuf::Value> Utility(
      const std::string& name, const google::protobuf::ListValue& args) = 0;

  // How many requests run concurrently (the batch capacity). Constant.
  virtual int capacity() const = 0;

  // How the engine takes over a lost request (ResumeMode). Constant; the worker
  // announces it in Ready.resume. kNone by default: replay is a promise about
  // every output the engine makes, which an engine must opt into.
  virtual ResumeMode resume_mode() const { return ResumeMode::kNone; }

  // What it holds now (metrics). Called on the busy-loop thread.
  virtual EngineLoad load() const = 0;

  // Whether it takes input in pieces (StreamedInput). Constant; the worker
  // announces it in Ready.streamed_input. kWhole by default: every engine
  // implements AppendInput().
  virtual StreamedInput streamed_input() const { return StreamedInput::kWhole; }

  // Its prefix cache; none by default. Constant; the worker announces it in
  // Ready.prefix_cache.
  virtual PrefixCacheLayout prefix_cache() const { return {}; }
  // The cache's figures now (metrics). Called on the busy-loop thread.
  virtual PrefixCacheStats prefix_cache_stats() const { return {}; }
  // The cache's changes since the previous call, oldest first (the worker
  // passes them to the sessions that asked: Hello.want_cache_events). Called on
  // the busy-loop thread, after each Step(); an engine without a cache, or one
  // that does not report its changes, returns none.
  virtual std::vector<CacheChange> TakeCacheChanges() { return {}; }
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_BASE_ENGINE_H_
