// PeerSet: the other orchestrators sharing this one's workers, and the two calls
// it makes to them (OrchestratorPeer: a forwarded Abort, a status).
//
// Peers come from the config's `peers:` — a fixed list, or a DNS name (the
// orchestrator Deployment's headless Service) re-read every refresh — as
// addresses of their peer ports. Each peer is asked for its node id when it
// appears and again every probe interval, so that generated request ids
// (request_id.h) map to the peer holding them; the list may include this
// orchestrator itself, which it recognises by its own node id and then leaves
// out. A peer that never answered has no node id yet: it is still asked
// whenever an id's owner is not known.
//
// Peer calls use mutual TLS when credentials are given (--peer_tls_*): the peer
// is checked against the name dialled (the discovery name for DNS peers).
// Everything but the constructor runs on the event loop; so do call
// completions (on the thread that read the answer when the loop is free).
#ifndef OMNISTAGE_ORCHESTRATOR_PEERS_PEER_SET_H_
#define OMNISTAGE_ORCHESTRATOR_PEERS_PEER_SET_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/liveness.h"
#include "common/scheduler.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator_peer.grpc.pb.h"

namespace omnistage {

// One peer as this orchestrator knows it.
struct PeerInfo {
  // Its peer port, host:port.
  std::string address;
  // From its last answer; "" until it answered once.
  std::string node_id;
  // Why its last call failed ("" after a success).
  std::string last_error;
};

// The calls the abort router and the cluster status make to peers: the seam
// their tests fake. Callbacks run on the caller's event loop.
class PeerCalls {
 public:
  virtual ~PeerCalls() = default;
  // The peers now, this orchestrator left out, ordered by address.
  virtual std::vector<PeerInfo> Peers() const = 0;
  virtual void Abort(const std::string& address, v1::PeerAbortRequest request,
                     absl::Time deadline,
                     std::function<void(absl::StatusOr<v1::AbortResponse>)> done) = 0;
  virtual void Status(const std::string& address, absl::Time deadline,
                      std::function<void(absl::StatusOr<v1::PeerStatusResponse>)> done) = 0;
};

struct PeerSetOptions {
  // This orchestrator's node id.
  std::string self_node;
  // Mutual TLS to the peers; null: plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // The name peers' certificates must carry, when it is not the host dialled
  // (the discovery name); "" otherwise.
  std::string tls_name;
  // How often every peer is asked its node id again (a restarted peer has a new
  // one), and how long such a probe may take.
  absl::Duration probe_interval = absl::Seconds(5);
  absl::Duration probe_timeout = absl::Seconds(2);
};

class PeerSet final : public PeerCalls {
 public:
  // `loop` runs every method and callback; it must outlive the set's calls
  // (Stop() cancels them).
  PeerSet(PeerSetOptions options, Scheduler* loop);
  ~PeerSet() override;

  // The peers' addresses now, from the config or a DNS answer. A failed lookup
  // changes nothing (its error is kept for status).
  void Apply(const absl::StatusOr<std::vector<std::string>>& addresses);
  // Cancels the calls in flight and the probe timer; later calls fail at once.
  void Stop();
  // Why the last lookup of the peers failed ("" after a success).
  const std::string& discovery_error() const { return discovery_error_; }

  // PeerCalls.
  std::vector<PeerInfo> Peers() const override;
  void Abort(const std::string& address, v1::PeerAbortRequest request, absl::Time deadline,
             std::function<void(absl::StatusOr<v1::AbortResponse>)> done) override;
  void Status(const std::string& address, absl::Time deadline,
              std::function<void(absl::StatusOr<v1::PeerStatusResponse>)> done) override;

 private:
  struct Peer;
  template <typename Response>
  struct Call;
  // Asks `address` its node id (and records it, or the error).
  void Probe(const std::string& address);
  // Probes every peer after the interval, and again after each.
  void ScheduleProbes();
  // The peer at `address`, or null when it is not (or no longer) a peer.
  Peer* Find(const std::string& address) const;
  template <typename Request, typename Response, typename Method>
  void Start(const std::string& address, Method method, const Request& request,
             absl::Time deadline, std::function<void(absl::StatusOr<Response>)> done);

  const PeerSetOptions options_;
  Scheduler* const loop_;
  std::map<std::string, std::unique_ptr<Peer>> peers_;
  std::string discovery_error_;
  Scheduler::TimerId probe_timer_ = 0;
  bool stopped_ = false;
  // The contexts of the calls in flight, to cancel on Stop().
  std::map<uint64_t, std::shared_ptr<grpc::ClientContext>> in_flight_;
  uint64_t next_call_ = 1;
  // Expires with the set, so late completions do nothing.
  Liveness alive_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_PEERS_PEER_SET_H_
