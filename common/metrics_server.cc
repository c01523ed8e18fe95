#include "common/metrics_server.h"

#include <sys/socket.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "httplib.h"

namespace omnistage {
namespace {

// A scrape is one short request; two threads serve a few concurrent scrapers.
constexpr int kThreads = 2;

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen, const MetricsRegistry* registry) {
  absl::StatusOr<HostPort> at = ParseHostPort(listen, PortRule::kListen);
  if (!at.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("metrics address '", listen, "': ",
                                                   at.status().message(), " (e.g. 0.0.0.0:9090)"));
  }
  const std::string& host = at->host;
  const int port = at->port;
  auto server = std::make_unique<httplib::Server>();
  server->new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  // Not httplib's default, which adds SO_REUSEPORT: a second process on the
  // same port must fail to start, not share it.
  server->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server->Get("/metrics", [registry](const httplib::Request&, httplib::Response& response) {
    response.set_content(registry->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  const int bound = port == 0 ? server->bind_to_any_port(host.c_str())
                              : (server->bind_to_port(host.c_str(), port) ? port : -1);
  if (bound < 0) {
    return absl::UnavailableError(absl::StrCat("metrics address ", listen, ": cannot listen"));
  }
  std::unique_ptr<MetricsServer> metrics(new MetricsServer(std::move(server), bound));
  metrics->thread_ = std::thread([m = metrics.get()] {
    m->server_->listen_after_bind();
    m->finished_ = true;
  });
  return metrics;
}

MetricsServer::MetricsServer(std::unique_ptr<httplib::Server> server, int port)
    : server_(std::move(server)), port_(port) {}

MetricsServer::~MetricsServer() {
  // stop() does nothing before the loop runs: wait for it to start (or end).
  while (!server_->is_running() && !finished_) std::this_thread::yield();
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace omnistage
