#include "tests/prometheus_server.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/testing/free_port.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "httplib.h"

namespace omnistage {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr && *dir != '\0' ? dir : "/tmp";
}

}  // namespace

absl::StatusOr<std::unique_ptr<PrometheusServer>> PrometheusServer::Start(
    const std::vector<std::string>& targets) {
  if (access(kBinary, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kBinary, " is missing: run ./setup.sh (Debian package prometheus)"));
  }
  const std::string dir = absl::StrCat(TempDir(), "/prometheus-", getpid(), "-", FreeLoopbackPort());
  const std::string config = absl::StrCat(dir, ".yml");
  {
    std::ofstream out(config);
    out << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        << "scrape_configs:\n  - job_name: omnistage\n    static_configs:\n"
        << "      - targets: [\"" << absl::StrJoin(targets, "\", \"") << "\"]\n";
  }
  const int port = FreeLoopbackPort();
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(
      {kBinary, absl::StrCat("--config.file=", config),
       absl::StrCat("--storage.tsdb.path=", dir),
       absl::StrCat("--web.listen-address=127.0.0.1:", port), "--log.level=warn"});
  if (!process.ok()) return process.status();
  std::unique_ptr<PrometheusServer> server(new PrometheusServer(port, *std::move(process)));
  httplib::Client client("127.0.0.1", port);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    httplib::Result ready = client.Get("/-/ready");
    if (ready && ready->status == 200) return server;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("prometheus on port ", port, " not ready"));
}

absl::StatusOr<double> PrometheusServer::QueryScalar(const std::string& promql) {
  httplib::Client client("127.0.0.1", port_);
  httplib::Result result = client.Get("/api/v1/query", {{"query", promql}}, httplib::Headers{});
  if (!result) {
    return absl::UnavailableError(absl::StrCat("query: ", httplib::to_string(result.error())));
  }
  google::protobuf::Struct body;
  if (!google::protobuf::util::JsonStringToMessage(result->body, &body).ok() ||
      result->status != 200) {
    return absl::InternalError(absl::StrCat("query answered ", result->status, ": ", result->body));
  }
  // {"data": {"resultType": "vector", "result": [{"metric": {...}, "value": [t, "10"]}]}}
  const google::protobuf::Struct& data = body.fields().at("data").struct_value();
  const google::protobuf::Value& samples = data.fields().at("result");
  const google::protobuf::ListValue* value = &samples.list_value();  // A scalar: [t, "v"].
  if (data.fields().at("resultType").string_value() == "vector") {
    if (samples.list_value().values_size() == 0) return absl::NotFoundError("empty result");
    value = &samples.list_value().values(0).struct_value().fields().at("value").list_value();
  }
  if (value->values_size() != 2) return absl::InternalError(result->body);
  return std::stod(value->values(1).string_value());
}

absl::Status PrometheusServer::AwaitValue(const std::string& promql, double want,
                                          absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<double> last = absl::NotFoundError("not asked yet");
  while (absl::Now() < deadline) {
    last = QueryScalar(promql);
    if (last.ok() && *last == want) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(250));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(promql, " is ", last.ok() ? absl::StrCat(*last) : last.status().ToString(),
                   ", wanted ", want));
}

}  // namespace omnistage
