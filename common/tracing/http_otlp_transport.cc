#include "common/tracing/http_otlp_transport.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace omnistage {

absl::StatusOr<std::unique_ptr<HttpOtlpTransport>> HttpOtlpTransport::Create(
    const std::string& url, std::vector<std::pair<std::string, std::string>> headers,
    const std::string& ca_file) {
  const bool tls = absl::StartsWith(url, "https://");
  if (!tls && !absl::StartsWith(url, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("the OTLP/HTTP traces endpoint '", url,
                                                   "' is not an http:// or https:// URL"));
  }
  const size_t host_start = tls ? 8 : 7;
  const size_t slash = url.find('/', host_start);
  const std::string origin = url.substr(0, slash);
  const std::string path = slash == std::string::npos ? "/" : url.substr(slash);
  if (origin.size() <= host_start) {
    return absl::InvalidArgumentError(
        absl::StrCat("the OTLP/HTTP traces endpoint '", url, "' names no host"));
  }
  auto client = std::make_unique<httplib::Client>(origin);
  if (!client->is_valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the OTLP/HTTP traces endpoint '", url, "' cannot be used"));
  }
  if (tls) {
    client->enable_server_certificate_verification(true);
    if (!ca_file.empty()) client->set_ca_cert_path(ca_file);
  }
  client->set_keep_alive(true);
  return std::unique_ptr<HttpOtlpTransport>(
      new HttpOtlpTransport(url, path, std::move(client), std::move(headers)));
}

HttpOtlpTransport::HttpOtlpTransport(std::string url, std::string path,
                                     std::unique_ptr<httplib::Client> client,
                                     std::vector<std::pair<std::string, std::string>> headers)
    : url_(std::move(url)),
      path_(std::move(path)),
      headers_(std::move(headers)),
      client_(std::move(client)) {}

HttpOtlpTransport::~HttpOtlpTransport() = default;

absl::Status HttpOtlpTransport::Send(const std::string& request, absl::Duration timeout) {
  httplib::Headers headers;
  for (const auto& [key, value] : headers_) headers.emplace(key, value);
  absl::MutexLock lock(&mu_);
  const auto micros = std::chrono::microseconds(absl::ToInt64Microseconds(timeout));
  client_->set_connection_timeout(micros);
  client_->set_read_timeout(micros);
  client_->set_write_timeout(micros);
  httplib::Result result = client_->Post(path_, headers, request, "application/x-protobuf");
  if (!result) {
    return absl::UnavailableError(
        absl::StrCat("POST ", url_, ": ", httplib::to_string(result.error())));
  }
  const int code = result->status;
  if (code >= 200 && code < 300) return absl::OkStatus();
  const std::string what = absl::StrCat("POST ", url_, ": HTTP ", code);
  if (code == 429) return absl::ResourceExhaustedError(what);
  if (code == 502 || code == 503 || code == 504) return absl::UnavailableError(what);
  return absl::InvalidArgumentError(what);
}

std::string HttpOtlpTransport::Describe() const { return absl::StrCat("http ", url_); }

}  // namespace omnistage
