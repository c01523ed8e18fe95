// MetricsServer: serves a MetricsRegistry at GET /metrics (Prometheus text
// format 0.0.4) over HTTP/1.1, with cpp-httplib, on threads of its own — never
// on a service's gRPC or event-loop threads.
//
//   auto server = MetricsServer::Start("0.0.0.0:9090", &registry);
//   (*server)->port();     // the bound port (port 0 picks one)
//   server->reset();       // stops serving and joins its threads
//
// Any other path is 404. Thread-safe.
#ifndef OMNISTAGE_COMMON_METRICS_SERVER_H_
#define OMNISTAGE_COMMON_METRICS_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/metrics.h"

namespace httplib {
class Server;
}

namespace omnistage {

class MetricsServer {
 public:
  // `listen` is host:port ("127.0.0.1:9090", "0.0.0.0:0", "[::]:9090").
  // INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen,
                                                              const MetricsRegistry* registry);
  ~MetricsServer();

  int port() const { return port_; }

 private:
  MetricsServer(std::unique_ptr<httplib::Server> server, int port);

  std::unique_ptr<httplib::Server> server_;
  const int port_;
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_METRICS_SERVER_H_
