#include "orchestrator/peers/peer_set.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/channel_release.h"
#include "common/grpc/grpc_util.h"
#include "common/log.h"

namespace omnistage {

struct PeerSet::Peer {
  PeerInfo info;
  // It answered with this orchestrator's own node id.
  bool self = false;
  // Each call in flight holds the channel too, and hands it on to
  // ReleaseChannelLater once done: gRPC releases a call after its last
  // callback, so the channel must outlive that callback (channel_release.h).
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::OrchestratorPeer::Stub> stub;
};

PeerSet::PeerSet(PeerSetOptions options, Scheduler* loop)
    : options_(std::move(options)), loop_(loop) {}

PeerSet::~PeerSet() { Stop(); }

void PeerSet::Stop() {
  if (stopped_) return;
  stopped_ = true;
  loop_->Cancel(probe_timer_);
  for (auto& [id, context] : in_flight_) context->TryCancel();
}

void PeerSet::Apply(const absl::StatusOr<std::vector<std::string>>& addresses) {
  if (stopped_) return;
  if (!addresses.ok()) {
    discovery_error_ = std::string(addresses.status().message());
    return;
  }
  discovery_error_.clear();
  std::map<std::string, std::unique_ptr<Peer>> peers;
  std::vector<std::string> added;
  for (const std::string& address : *addresses) {
    if (peers.count(address) > 0) continue;
    auto it = peers_.find(address);
    if (it != peers_.end()) {
      peers[address] = std::move(it->second);
      continue;
    }
    auto peer = std::make_unique<Peer>();
    peer->info.address = address;
    grpc::ChannelArguments args;
    // Calls fail fast while a peer cannot be reached (its ids' aborts are
    // FAILED, retryable, rather than waiting); so that a peer that has just
    // started (or restarted) is reached within a moment, reconnect soon.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    if (!options_.tls_name.empty()) args.SetSslTargetNameOverride(options_.tls_name);
    peer->channel = grpc::CreateCustomChannel(
        address,
        options_.credentials != nullptr ? options_.credentials : grpc::InsecureChannelCredentials(),
        args);
    peer->stub = v1::OrchestratorPeer::NewStub(peer->channel);
    peers[address] = std::move(peer);
    added.push_back(address);
  }
  for (const auto& [address, peer] : peers_) {
    if (peers.count(address) == 0 && peer != nullptr) LogInfo("peer " + address + " left");
  }
  peers_ = std::move(peers);
  for (const std::string& address : added) Probe(address);
  if (probe_timer_ == 0) ScheduleProbes();
}

void PeerSet::ScheduleProbes() {
  probe_timer_ = loop_->PostAfter(options_.probe_interval, [this, alive = alive_.watch()] {
    if (!alive || stopped_) return;
    for (const auto& [address, peer] : peers_) Probe(address);
    ScheduleProbes();
  });
}

void PeerSet::Probe(const std::string& address) {
  // Status() records the node id (or the error) of every answer.
  Status(address, loop_->Now() + options_.probe_timeout,
         [](const absl::StatusOr<v1::PeerStatusResponse>&) {});
}

PeerSet::Peer* PeerSet::Find(const std::string& address) const {
  auto it = peers_.find(address);
  return it == peers_.end() ? nullptr : it->second.get();
}

std::vector<PeerInfo> PeerSet::Peers() const {
  std::vector<PeerInfo> peers;
  for (const auto& [address, peer] : peers_) {
    if (!peer->self) peers.push_back(peer->info);
  }
  return peers;
}

template <typename Request, typename Response, typename Method>
void PeerSet::Start(const std::string& address, Method method, const Request& request,
                    absl::Time deadline, std::function<void(absl::StatusOr<Response>)> done) {
  Peer* peer = Find(address);
  if (stopped_ || peer == nullptr) {
    loop_->Post([done = std::move(done), address] {
      done(absl::UnavailableError(absl::StrCat("peer ", address, " is no longer listed")));
    });
    return;
  }
  auto context = std::make_shared<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(deadline));
  auto call_request = std::make_shared<Request>(request);
  auto response = std::make_shared<Response>();
  const uint64_t id = next_call_++;
  in_flight_[id] = context;
  method(peer->stub->async(), context.get(), call_request.get(), response.get(),
         [this, loop = loop_, alive = alive_.watch(), id, address, channel = peer->channel, context,
          call_request, response, done = std::move(done)](grpc::Status status) mutable {
           // The thread that read the answer handles it when the loop is free.
           // The channel goes with it, never to be dropped here, inside gRPC.
           loop->RunOrPost([this, alive, id, address, status, response,
                            channel = std::move(channel), done = std::move(done)]() mutable {
             ReleaseChannelLater(std::move(channel));
             if (!alive) return;
             in_flight_.erase(id);
             Peer* peer = Find(address);
             if (!status.ok()) {
               absl::Status failed = FromGrpcStatus(status);
               failed = absl::Status(failed.code(),
                                     absl::StrCat("peer ", address, ": ", failed.message()));
               if (peer != nullptr) peer->info.last_error = std::string(failed.message());
               done(failed);
               return;
             }
             if (peer != nullptr) peer->info.last_error.clear();
             done(std::move(*response));
           });
         });
}

void PeerSet::Abort(const std::string& address, v1::PeerAbortRequest request, absl::Time deadline,
                    std::function<void(absl::StatusOr<v1::AbortResponse>)> done) {
  request.set_from_node(options_.self_node);
  Start<v1::PeerAbortRequest, v1::AbortResponse>(
      address,
      [](auto* async, grpc::ClientContext* context, const v1::PeerAbortRequest* request,
         v1::AbortResponse* response, std::function<void(grpc::Status)> on_done) {
        async->PeerAbort(context, request, response, std::move(on_done));
      },
      request, deadline, std::move(done));
}

void PeerSet::Status(const std::string& address, absl::Time deadline,
                     std::function<void(absl::StatusOr<v1::PeerStatusResponse>)> done) {
  v1::PeerStatusRequest request;
  request.set_from_node(options_.self_node);
  Start<v1::PeerStatusRequest, v1::PeerStatusResponse>(
      address,
      [](auto* async, grpc::ClientContext* context, const v1::PeerStatusRequest* request,
         v1::PeerStatusResponse* response, std::function<void(grpc::Status)> on_done) {
        async->PeerStatus(context, request, response, std::move(on_done));
      },
      request, deadline,
      [this, address, done = std::move(done)](absl::StatusOr<v1::PeerStatusResponse> answer) {
        // Every answer refreshes what the peer's node id is.
        if (Peer* peer = Find(address); peer != nullptr && answer.ok()) {
          if (peer->info.node_id != answer->node_id()) {
            peer->self = answer->node_id() == options_.self_node;
            peer->info.node_id = answer->node_id();
            if (!peer->self) {
              LogInfo(absl::StrCat("peer ", address, " is node ", answer->node_id()));
            }
          }
        }
        done(std::move(answer));
      });
}

}  // namespace omnistage
