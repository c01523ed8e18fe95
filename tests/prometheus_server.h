// PrometheusServer: a real Prometheus server for tests (Debian's prometheus
// package) on a loopback port, scraping the given targets every second, with
// its data in the test's temporary folder.
//
//   auto prometheus = PrometheusServer::Start({"127.0.0.1:9101", "127.0.0.1:9102"});
//   absl::StatusOr<double> n = (*prometheus)->QueryScalar("sum(omnistage_requests_total)");
//
// Stopped by PID when the object goes (ChildProcess), and dies with the thread
// that started it.
#ifndef OMNISTAGE_TESTS_PROMETHEUS_SERVER_H_
#define OMNISTAGE_TESTS_PROMETHEUS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/testing/child_process.h"

namespace omnistage {

class PrometheusServer {
 public:
  static constexpr char kBinary[] = "/usr/bin/prometheus";

  // FAILED_PRECONDITION when Prometheus is not installed (setup.sh installs it).
  // Returns once the server is ready.
  static absl::StatusOr<std::unique_ptr<PrometheusServer>> Start(
      const std::vector<std::string>& targets);

  int port() const { return port_; }
  pid_t pid() const { return process_->pid(); }
  // The value of an instant PromQL query whose result is one sample (or a
  // scalar). NOT_FOUND when the result is empty.
  absl::StatusOr<double> QueryScalar(const std::string& promql);
  // Polls QueryScalar until it returns `want`; the last value or error if not
  // within `timeout`.
  absl::Status AwaitValue(const std::string& promql, double want, absl::Duration timeout);

 private:
  PrometheusServer(int port, std::unique_ptr<ChildProcess> process)
      : port_(port), process_(std::move(process)) {}

  const int port_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_PROMETHEUS_SERVER_H_
