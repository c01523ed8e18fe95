#include "common/tracing/tracing_options.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/tracing/grpc_otlp_transport.h"
#include "common/tracing/http_otlp_transport.h"

namespace omnistage {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoded; a malformed escape is kept as it is.
std::string PercentDecoded(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexDigit(text[i + 1]) >= 0 &&
        HexDigit(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexDigit(text[i + 1]) * 16 + HexDigit(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// "key=value,key2=value2" (W3C Baggage-like, as OTEL_EXPORTER_OTLP_HEADERS
// and OTEL_RESOURCE_ATTRIBUTES spell them).
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> KeyValues(
    const std::string& variable, absl::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view member : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    const size_t eq = member.find('=');
    const std::string key(absl::StripAsciiWhitespace(member.substr(0, eq)));
    if (eq == absl::string_view::npos || key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          variable, ": '", member, "' is not key=value (members are separated by commas)"));
    }
    out.emplace_back(key, PercentDecoded(absl::StripAsciiWhitespace(member.substr(eq + 1))));
  }
  return out;
}

absl::StatusOr<int64_t> Positive(const std::string& variable, const std::string& text,
                                 int64_t otherwise) {
  if (text.empty()) return otherwise;
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(variable, "='", text, "' is not a positive whole number"));
  }
  return value;
}

void AddAttribute(opentelemetry::proto::resource::v1::Resource* resource, const std::string& key,
                  const std::string& value) {
  for (auto& attribute : *resource->mutable_attributes()) {
    if (attribute.key() == key) {
      attribute.mutable_value()->set_string_value(value);
      return;
    }
  }
  auto* attribute = resource->add_attributes();
  attribute->set_key(key);
  attribute->mutable_value()->set_string_value(value);
}

}  // namespace

absl::StatusOr<TracingOptions> TracingOptions::Read(
    const std::function<const char*(const char*)>& getenv, const TracingFlags& flags,
    const std::string& service_name) {
  auto env = [&](const std::string& name) -> std::string {
    const char* value = getenv(name.c_str());
    return value == nullptr ? "" : std::string(absl::StripAsciiWhitespace(value));
  };
  // The traces' own variable, else the one for every signal.
  auto otlp = [&](const std::string& suffix) -> std::pair<std::string, std::string> {
    const std::string traces = "OTEL_EXPORTER_OTLP_TRACES_" + suffix;
    if (!env(traces).empty()) return {traces, env(traces)};
    const std::string all = "OTEL_EXPORTER_OTLP_" + suffix;
    return {all, env(all)};
  };
  TracingOptions options;
  options.sampler_name =
      flags.trace_sampler.empty() ? env("OTEL_TRACES_SAMPLER") : flags.trace_sampler;
  options.sampler_arg =
      flags.trace_sampler_arg.empty() ? env("OTEL_TRACES_SAMPLER_ARG") : flags.trace_sampler_arg;
  if (absl::Status valid = Sampler::Parse(options.sampler_name, options.sampler_arg).status();
      !valid.ok()) {
    return valid;
  }
  if (absl::AsciiStrToLower(env("OTEL_SDK_DISABLED")) == "true") return options;
  const std::string exporter = absl::AsciiStrToLower(env("OTEL_TRACES_EXPORTER"));
  if (exporter == "none") return options;
  if (!exporter.empty() && exporter != "otlp") {
    return absl::InvalidArgumentError(
        absl::StrCat("OTEL_TRACES_EXPORTER='", exporter,
                     "': omnistage exports traces over OTLP only (otlp, none)"));
  }

  const auto [protocol_variable, protocol_env] = otlp("PROTOCOL");
  const std::string protocol = flags.otlp_protocol.empty() ? protocol_env : flags.otlp_protocol;
  if (protocol == "grpc") {
    options.protocol = Protocol::kGrpc;
  } else if (protocol.empty() || protocol == "http/protobuf") {
    options.protocol = Protocol::kHttpProtobuf;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(flags.otlp_protocol.empty() ? protocol_variable : "--otlp_protocol", "='",
                     protocol, "': grpc or http/protobuf (http/json is not supported)"));
  }

  // The signal's own endpoint is used as it is; the base one gets the
  // traces' path over HTTP.
  std::string endpoint = flags.otlp_traces_endpoint;
  if (endpoint.empty()) endpoint = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  if (endpoint.empty()) {
    endpoint = env("OTEL_EXPORTER_OTLP_ENDPOINT");
    if (!endpoint.empty() && options.protocol == Protocol::kHttpProtobuf) {
      while (absl::EndsWith(endpoint, "/")) endpoint.pop_back();
      endpoint += "/v1/traces";
    }
  }
  if (endpoint.empty()) return options;  // Nowhere to send: off.

  const bool https = absl::StartsWith(endpoint, "https://");
  const bool http = absl::StartsWith(endpoint, "http://");
  if (options.protocol == Protocol::kHttpProtobuf) {
    if (!https && !http) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the OTLP traces endpoint '", endpoint,
          "' is not an http:// or https:// URL (OTLP/HTTP; for gRPC set the protocol to grpc)"));
    }
    options.tls = https;
    options.endpoint = endpoint;
  } else {
    std::string target = endpoint;
    if (https || http) target = target.substr(https ? 8 : 7);
    target = target.substr(0, target.find('/'));
    if (target.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the OTLP traces endpoint '", endpoint, "' names no host"));
    }
    const std::string insecure = absl::AsciiStrToLower(otlp("INSECURE").second);
    options.tls = https || (!http && insecure != "true");
    options.endpoint = target;
  }

  const auto [headers_variable, headers] = otlp("HEADERS");
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> parsed =
      KeyValues(headers_variable, headers);
  if (!parsed.ok()) return parsed.status();
  options.headers = *std::move(parsed);
  options.ca_file = otlp("CERTIFICATE").second;

  OtlpExportOptions& exporting = options.export_options;
  const auto [timeout_variable, timeout] = otlp("TIMEOUT");
  absl::StatusOr<int64_t> timeout_ms = Positive(timeout_variable, timeout, 10000);
  absl::StatusOr<int64_t> delay_ms =
      Positive("OTEL_BSP_SCHEDULE_DELAY", env("OTEL_BSP_SCHEDULE_DELAY"), 5000);
  absl::StatusOr<int64_t> queue =
      Positive("OTEL_BSP_MAX_QUEUE_SIZE", env("OTEL_BSP_MAX_QUEUE_SIZE"), 2048);
  absl::StatusOr<int64_t> batch =
      Positive("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"), 512);
  for (const absl::StatusOr<int64_t>* value : {&timeout_ms, &delay_ms, &queue, &batch}) {
    if (!value->ok()) return value->status();
  }
  exporting.timeout = absl::Milliseconds(*timeout_ms);
  exporting.delay = absl::Milliseconds(*delay_ms);
  exporting.max_queue = static_cast<size_t>(*queue);
  exporting.max_batch = static_cast<size_t>(std::min(*batch, *queue));

  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> attributes =
      KeyValues("OTEL_RESOURCE_ATTRIBUTES", env("OTEL_RESOURCE_ATTRIBUTES"));
  if (!attributes.ok()) return attributes.status();
  auto* resource = &exporting.resource;
  AddAttribute(resource, "service.name", service_name);
  for (const auto& [key, value] : *attributes) AddAttribute(resource, key, value);
  if (!env("OTEL_SERVICE_NAME").empty())
    AddAttribute(resource, "service.name", env("OTEL_SERVICE_NAME"));
  AddAttribute(resource, "telemetry.sdk.name", "omnistage");
  AddAttribute(resource, "telemetry.sdk.language", "cpp");
  options.enabled = true;
  return options;
}

absl::StatusOr<std::unique_ptr<Tracer>> TracingOptions::MakeTracer() const {
  if (!enabled) return std::make_unique<Tracer>();
  absl::StatusOr<Sampler> sampler = Sampler::Parse(sampler_name, sampler_arg);
  if (!sampler.ok()) return sampler.status();
  std::unique_ptr<OtlpTransport> transport;
  if (protocol == Protocol::kGrpc) {
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (tls) {
      grpc::SslCredentialsOptions ssl;
      if (!ca_file.empty()) {
        std::ifstream in(ca_file);
        if (!in) {
          return absl::InvalidArgumentError(
              absl::StrCat("cannot read the OTLP collector's CA file '", ca_file, "'"));
        }
        std::stringstream pem;
        pem << in.rdbuf();
        ssl.pem_root_certs = pem.str();
      }
      credentials = grpc::SslCredentials(ssl);
    }
    transport = std::make_unique<GrpcOtlpTransport>(endpoint, credentials, headers);
  } else {
    absl::StatusOr<std::unique_ptr<HttpOtlpTransport>> http =
        HttpOtlpTransport::Create(endpoint, headers, ca_file);
    if (!http.ok()) return http.status();
    transport = *std::move(http);
  }
  return std::make_unique<Tracer>(
      *std::move(sampler), std::make_unique<OtlpExporter>(export_options, std::move(transport)));
}

std::string TracingOptions::Describe() const {
  if (!enabled) return "off";
  return absl::StrCat(protocol == Protocol::kGrpc ? "grpc " : "http/protobuf ",
                      protocol == Protocol::kGrpc && tls ? "tls " : "", endpoint, ", sampler ",
                      Sampler::Parse(sampler_name, sampler_arg)->Describe());
}

}  // namespace omnistage
