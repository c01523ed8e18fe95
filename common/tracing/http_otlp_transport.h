// HttpOtlpTransport: OTLP over HTTP with a protobuf body, a POST of the
// ExportTraceServiceRequest to the collector's traces URL
// (http[s]://host:4318/v1/traces by default), one connection kept alive.
// 429, 502, 503 and 504 are retryable (UNAVAILABLE or RESOURCE_EXHAUSTED),
// as is a connection that failed; any other status is not.
//
//   absl::StatusOr<std::unique_ptr<HttpOtlpTransport>> transport =
//       HttpOtlpTransport::Create("http://otel-collector:4318/v1/traces", headers, "");
#ifndef OMNISTAGE_COMMON_TRACING_HTTP_OTLP_TRANSPORT_H_
#define OMNISTAGE_COMMON_TRACING_HTTP_OTLP_TRANSPORT_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/tracing/otlp_transport.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace omnistage {

class HttpOtlpTransport : public OtlpTransport {
 public:
  // `url`: http:// or https:// with a path; `ca_file` (https only; empty:
  // the system's roots) verifies the collector. INVALID_ARGUMENT for a URL
  // it cannot use.
  static absl::StatusOr<std::unique_ptr<HttpOtlpTransport>> Create(
      const std::string& url, std::vector<std::pair<std::string, std::string>> headers,
      const std::string& ca_file);
  ~HttpOtlpTransport() override;

  absl::Status Send(const std::string& request, absl::Duration timeout) override;
  std::string Describe() const override;

 private:
  HttpOtlpTransport(std::string url, std::string path, std::unique_ptr<httplib::Client> client,
                    std::vector<std::pair<std::string, std::string>> headers);

  const std::string url_;
  const std::string path_;
  const std::vector<std::pair<std::string, std::string>> headers_;
  absl::Mutex mu_;
  std::unique_ptr<httplib::Client> client_ ABSL_GUARDED_BY(mu_);
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_HTTP_OTLP_TRANSPORT_H_
