#include "orchestrator/grpc_replica_client.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"

namespace omnistage {
namespace {

std::chrono::system_clock::time_point Deadline(absl::Duration timeout) {
  return absl::ToChronoTime(absl::Now() + timeout);
}

}  // namespace

// One Connect stream. Holds itself alive until gRPC's OnDone; a hold keeps OnDone
// from coming before the client stops writing (Close()), so Write() from the loop
// is always legal until then.
class GrpcReplicaClient::Session
    : public grpc::ClientBidiReactor<v1::WorkerCommand, v1::WorkerEvent>,
      public std::enable_shared_from_this<Session> {
 public:
  explicit Session(GrpcReplicaClient* client) : client_(client) {}

  void Begin(v1::StageWorker::Stub* stub, v1::WorkerCommand hello) {
    self_ = shared_from_this();
    stub->async()->Connect(&context_, this);
    AddHold();
    (void)Write(std::move(hello));
    StartRead(&event_);
    StartCall();
  }

  absl::Status Write(v1::WorkerCommand command) {
    const v1::WorkerCommand* start = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return absl::UnavailableError("session closed");
      if (writing_) {
        queued_.push_back(std::move(command));
      } else {
        in_flight_ = std::move(command);
        writing_ = true;
        start = &in_flight_;
        ++starting_;  // Keeps Close() from releasing the hold under our feet.
      }
    }
    if (start == nullptr) return absl::OkStatus();
    StartWrite(start);
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      release = --starting_ == 0 && closed_;
    }
    if (release) RemoveHold();
    return absl::OkStatus();
  }

  // No more writes; lets the stream finish. Idempotent, any thread.
  void Close() {
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      closed_ = true;
      release = starting_ == 0;
    }
    if (release) RemoveHold();
  }

  void Cancel() { context_.TryCancel(); }

  // Set from the loop when a Fatal event arrives.
  std::string fatal_reason;

  void OnWriteDone(bool ok) override {
    const v1::WorkerCommand* start = nullptr;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) queued_.clear();  // The stream is broken; reads will end too.
      if (!queued_.empty()) {
        in_flight_ = std::move(queued_.front());
        queued_.pop_front();
        writing_ = true;
        start = &in_flight_;
      }
    }
    if (start != nullptr) StartWrite(start);
  }

  void OnReadDone(bool ok) override {
    std::shared_ptr<Session> self = shared_from_this();
    if (!ok) {
      Close();
      return;
    }
    auto event = std::make_shared<v1::WorkerEvent>(std::move(event_));
    event_.Clear();
    client_->loop_->Post([client = client_, self, event] {
      client->OnEvent(self.get(), std::move(*event));
    });
    StartRead(&event_);
  }

  void OnDone(const grpc::Status& status) override {
    std::shared_ptr<Session> self = std::move(self_);
    GrpcReplicaClient* client = client_;
    client->loop_->Post([client, self, status = FromGrpcStatus(status)] {
      client->OnSessionDone(self.get(), status);
    });
    absl::MutexLock lock(&client->mu_);
    --client->outstanding_;
    if (client->live_session_ == self) client->live_session_.reset();
  }

 private:
  GrpcReplicaClient* const client_;
  grpc::ClientContext context_;
  v1::WorkerEvent event_;
  std::shared_ptr<Session> self_;

  absl::Mutex mu_;
  std::deque<v1::WorkerCommand> queued_ ABSL_GUARDED_BY(mu_);
  v1::WorkerCommand in_flight_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int starting_ ABSL_GUARDED_BY(mu_) = 0;  // Write()s between their check and StartWrite.
};

GrpcReplicaClient::GrpcReplicaClient(ReplicaClientOptions options, EventLoop* loop)
    : options_(std::move(options)),
      loop_(loop),
      backoff_(options_.reconnect_initial_backoff) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, absl::ToInt64Milliseconds(options_.keepalive_time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              absl::ToInt64Milliseconds(options_.keepalive_timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect promptly; our own backoff paces the session attempts.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              absl::ToInt64Milliseconds(options_.reconnect_initial_backoff));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              absl::ToInt64Milliseconds(options_.reconnect_max_backoff));
  args.SetMaxReceiveMessageSize(64 << 20);
  channel_ = grpc::CreateCustomChannel(options_.address, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::StageWorker::NewStub(channel_);
}

GrpcReplicaClient::~GrpcReplicaClient() { Shutdown(); }

void GrpcReplicaClient::Start() { Connect(); }

void GrpcReplicaClient::Connect() {
  if (shut_down_) return;
  session_ = std::make_shared<Session>(this);
  ready_ = false;
  session_id_.clear();
  seq_ = 1;
  v1::WorkerCommand hello;
  hello.set_seq(seq_);
  hello.mutable_hello()->set_client_name("omnistage-orchestrator");
  hello.mutable_hello()->set_protocol_version(1);
  hello.mutable_hello()->set_expected_stage_id(options_.stage);
  {
    absl::MutexLock lock(&mu_);
    ++outstanding_;
    live_session_ = session_;
  }
  session_->Begin(stub_.get(), std::move(hello));
}

void GrpcReplicaClient::Shutdown() {
  std::shared_ptr<Session> session;
  {
    absl::MutexLock lock(&mu_);
    session = live_session_;
    for (auto& [key, context] : calls_) context->TryCancel();
  }
  shut_down_ = true;
  if (session != nullptr) {
    session->Cancel();
    session->Close();
  }
  session.reset();
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return outstanding_ == 0; };
  mu_.Await(absl::Condition(&idle));
}

void GrpcReplicaClient::OnEvent(Session* session, v1::WorkerEvent event) {
  if (session != session_.get()) return;  // A previous session's leftovers.
  switch (event.event_case()) {
    case v1::WorkerEvent::kReady:
      ready_ = true;
      session_id_ = event.ready().session_id();
      backoff_ = options_.reconnect_initial_backoff;
      listener_->OnReplicaReady(options_.stage, options_.replica, event.ready());
      return;
    case v1::WorkerEvent::kStep:
      listener_->OnStepOutputs(options_.stage, options_.replica,
                               std::move(*event.mutable_step()));
      return;
    case v1::WorkerEvent::kRejected:
      listener_->OnCommandRejected(options_.stage, options_.replica, event.rejected());
      return;
    case v1::WorkerEvent::kUtilityResult: {
      auto it = utilities_.find(event.utility_result().call_id());
      if (it == utilities_.end()) return;
      auto done = std::move(it->second);
      utilities_.erase(it);
      const v1::UtilityResult& result = event.utility_result();
      if (result.has_error()) {
        done(absl::Status(static_cast<absl::StatusCode>(result.error().code()),
                          result.error().message()));
      } else {
        done(result.value());
      }
      return;
    }
    case v1::WorkerEvent::kFatal:
      session->fatal_reason = event.fatal().reason();
      return;
    case v1::WorkerEvent::EVENT_NOT_SET:
      return;
  }
}

void GrpcReplicaClient::OnSessionDone(Session* session, const absl::Status& status) {
  if (session != session_.get()) return;
  std::string reason =
      session->fatal_reason.empty()
          ? std::string(status.ok() ? "the worker closed the session" : status.message())
          : absl::StrCat("fatal engine error: ", session->fatal_reason);
  session_.reset();
  ready_ = false;
  FailUtilities(absl::UnavailableError(reason));
  listener_->OnReplicaDown(options_.stage, options_.replica, absl::UnavailableError(reason));
  if (shut_down_) return;
  loop_->PostAfter(backoff_, [this] {
    if (session_ == nullptr) Connect();
  });
  backoff_ = std::min(backoff_ * 2, options_.reconnect_max_backoff);
}

absl::Status GrpcReplicaClient::Send(v1::WorkerCommand command) {
  if (session_ == nullptr || !ready_) {
    return absl::UnavailableError(absl::StrCat("stage ", options_.stage, " replica ",
                                               options_.replica, " is not connected"));
  }
  command.set_seq(++seq_);
  return session_->Write(std::move(command));
}

absl::Status GrpcReplicaClient::Add(v1::AddRequest request) {
  v1::WorkerCommand command;
  *command.mutable_add() = std::move(request);
  return Send(std::move(command));
}

absl::Status GrpcReplicaClient::AppendInput(v1::AppendInput input) {
  v1::WorkerCommand command;
  *command.mutable_append_input() = std::move(input);
  return Send(std::move(command));
}

void GrpcReplicaClient::CallUtility(
    const std::string& name, const google::protobuf::ListValue& args,
    std::function<void(absl::StatusOr<google::protobuf::Value>)> done) {
  const uint64_t call_id = next_call_id_++;
  v1::WorkerCommand command;
  command.mutable_utility()->set_call_id(call_id);
  command.mutable_utility()->set_name(name);
  *command.mutable_utility()->mutable_args() = args;
  if (absl::Status s = Send(std::move(command)); !s.ok()) {
    done(s);
    return;
  }
  utilities_[call_id] = std::move(done);
  loop_->PostAfter(options_.call_timeout, [this, call_id] {
    auto it = utilities_.find(call_id);
    if (it == utilities_.end()) return;
    auto timed_out = std::move(it->second);
    utilities_.erase(it);
    timed_out(absl::DeadlineExceededError("utility call timed out"));
  });
}

void GrpcReplicaClient::FailUtilities(const absl::Status& status) {
  auto pending = std::move(utilities_);
  utilities_.clear();
  for (auto& [id, done] : pending) done(status);
}

void GrpcReplicaClient::Abort(const std::vector<std::string>& ids,
                              std::function<void(absl::Status)> done) {
  if (session_ == nullptr || !ready_) {
    done(absl::UnavailableError(absl::StrCat("stage ", options_.stage, " replica ",
                                             options_.replica, " is not connected")));
    return;
  }
  struct Call {
    grpc::ClientContext context;
    v1::WorkerAbortRequest request;
    v1::WorkerAbortResponse response;
  };
  auto call = std::make_shared<Call>();
  call->request.set_session_id(session_id_);
  call->request.set_after_seq(seq_);
  for (const std::string& id : ids) call->request.add_request_ids(id);
  call->context.set_deadline(Deadline(options_.call_timeout));
  uint64_t key;
  {
    absl::MutexLock lock(&mu_);
    key = next_call_key_++;
    calls_[key] = &call->context;
    ++outstanding_;
  }
  stub_->async()->Abort(&call->context, &call->request, &call->response,
                        [this, call, key, done = std::move(done)](grpc::Status status) {
                          loop_->Post([call, done, status = FromGrpcStatus(status)] { done(status); });
                          absl::MutexLock lock(&mu_);
                          calls_.erase(key);
                          --outstanding_;
                        });
}

}  // namespace omnistage
