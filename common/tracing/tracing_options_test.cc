#include "common/tracing/tracing_options.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

// An environment of the test's own.
class Env {
 public:
  explicit Env(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  std::function<const char*(const char*)> getenv() const {
    return [this](const char* name) -> const char* {
      auto it = values_.find(name);
      return it == values_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> values_;
};

absl::StatusOr<TracingOptions> Read(std::map<std::string, std::string> values,
                                    TracingFlags flags = {}) {
  Env env(std::move(values));
  return TracingOptions::Read(env.getenv(), flags, "orchestrator");
}

std::string Attribute(const TracingOptions& options, const std::string& key) {
  for (const auto& attribute : options.export_options.resource.attributes()) {
    if (attribute.key() == key) return attribute.value().string_value();
  }
  return "";
}

TEST(TracingOptionsTest, OffWithoutAnEndpoint) {
  absl::StatusOr<TracingOptions> options = Read({});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_FALSE(options->enabled);
  EXPECT_EQ(options->Describe(), "off");
  absl::StatusOr<std::unique_ptr<Tracer>> tracer = options->MakeTracer();
  ASSERT_TRUE(tracer.ok());
  EXPECT_FALSE((*tracer)->enabled());
}

TEST(TracingOptionsTest, HttpProtobufByDefaultAtTheTracesPath) {
  absl::StatusOr<TracingOptions> options =
      Read({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"},
            {"OTEL_EXPORTER_OTLP_HEADERS", "api-key=s%3Dcret, tenant = a"},
            {"OTEL_SERVICE_NAME", "omni-orchestrator"},
            {"OTEL_RESOURCE_ATTRIBUTES", "service.name=ignored,deployment.environment=prod"},
            {"OTEL_BSP_SCHEDULE_DELAY", "200"},
            {"OTEL_BSP_MAX_QUEUE_SIZE", "100"}});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->enabled);
  EXPECT_EQ(options->protocol, TracingOptions::Protocol::kHttpProtobuf);
  EXPECT_EQ(options->endpoint, "http://collector:4318/v1/traces");
  EXPECT_FALSE(options->tls);
  ASSERT_EQ(options->headers.size(), 2u);
  EXPECT_EQ(options->headers[0], (std::pair<std::string, std::string>{"api-key", "s=cret"}));
  EXPECT_EQ(options->headers[1], (std::pair<std::string, std::string>{"tenant", "a"}));
  EXPECT_EQ(Attribute(*options, "service.name"), "omni-orchestrator");
  EXPECT_EQ(Attribute(*options, "deployment.environment"), "prod");
  EXPECT_EQ(options->export_options.delay, absl::Milliseconds(200));
  EXPECT_EQ(options->export_options.max_queue, 100u);
  // The batch is never larger than the queue.
  EXPECT_EQ(options->export_options.max_batch, 100u);
  absl::StatusOr<std::unique_ptr<Tracer>> tracer = options->MakeTracer();
  ASSERT_TRUE(tracer.ok()) << tracer.status();
  EXPECT_TRUE((*tracer)->enabled());
  EXPECT_EQ((*tracer)->exporter()->transport().Describe(), "http http://collector:4318/v1/traces");
}

TEST(TracingOptionsTest, TheServiceNameDefaultsToTheProcesssOwn) {
  absl::StatusOr<TracingOptions> options =
      Read({{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://collector/custom/path"}});
  ASSERT_TRUE(options.ok()) << options.status();
  // The traces' own endpoint is taken as it is.
  EXPECT_EQ(options->endpoint, "https://collector/custom/path");
  EXPECT_TRUE(options->tls);
  EXPECT_EQ(Attribute(*options, "service.name"), "orchestrator");
}

TEST(TracingOptionsTest, GrpcTakesHostAndPort) {
  absl::StatusOr<TracingOptions> plain =
      Read({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"},
            {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"}});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->protocol, TracingOptions::Protocol::kGrpc);
  EXPECT_EQ(plain->endpoint, "collector:4317");
  EXPECT_FALSE(plain->tls);
  // No scheme: TLS unless insecure.
  absl::StatusOr<TracingOptions> bare = Read(
      {{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"}, {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}});
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->tls);
  absl::StatusOr<TracingOptions> insecure = Read({{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"},
                                                  {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
                                                  {"OTEL_EXPORTER_OTLP_INSECURE", "true"}});
  ASSERT_TRUE(insecure.ok());
  EXPECT_FALSE(insecure->tls);
  EXPECT_EQ(insecure->Describe(), "grpc collector:4317, sampler parentbased_always_on");
}

TEST(TracingOptionsTest, FlagsOverrideTheEnvironment) {
  TracingFlags flags;
  flags.otlp_traces_endpoint = "127.0.0.1:4317";
  flags.otlp_protocol = "grpc";
  flags.trace_sampler = "parentbased_traceidratio";
  flags.trace_sampler_arg = "0.01";
  absl::StatusOr<TracingOptions> options =
      Read({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://elsewhere:4318"},
            {"OTEL_EXPORTER_OTLP_INSECURE", "true"},
            {"OTEL_TRACES_SAMPLER", "always_off"}},
           flags);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->endpoint, "127.0.0.1:4317");
  EXPECT_EQ(options->Describe(), "grpc 127.0.0.1:4317, sampler parentbased_traceidratio 0.01");
}

TEST(TracingOptionsTest, DisabledByTheStandardSwitches) {
  for (const auto& [key, value] : std::map<std::string, std::string>{
           {"OTEL_SDK_DISABLED", "TRUE"}, {"OTEL_TRACES_EXPORTER", "none"}}) {
    absl::StatusOr<TracingOptions> options =
        Read({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}, {key, value}});
    ASSERT_TRUE(options.ok());
    EXPECT_FALSE(options->enabled) << key;
  }
}

TEST(TracingOptionsTest, WhatCannotBeUsedIsNamed) {
  const std::map<std::string, std::string> endpoint = {
      {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"}};
  auto with = [&](const std::string& key, const std::string& value) {
    std::map<std::string, std::string> values = endpoint;
    values[key] = value;
    return Read(values).status();
  };
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
           {"OTEL_TRACES_EXPORTER", "zipkin"},
           {"OTEL_TRACES_SAMPLER", "sometimes"},
           {"OTEL_TRACES_SAMPLER_ARG", "2"},
           {"OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign"},
           {"OTEL_EXPORTER_OTLP_TIMEOUT", "-5"},
           {"OTEL_BSP_MAX_QUEUE_SIZE", "many"},
           {"OTEL_RESOURCE_ATTRIBUTES", "=value"},
       }) {
    std::map<std::string, std::string> values = endpoint;
    if (key == "OTEL_TRACES_SAMPLER_ARG") values["OTEL_TRACES_SAMPLER"] = "traceidratio";
    values[key] = value;
    const absl::Status status = Read(values).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << key << "=" << value;
  }
  EXPECT_EQ(with("OTEL_EXPORTER_OTLP_TIMEOUT", "-5").message().find("OTEL_EXPORTER_OTLP_TIMEOUT"),
            0u);
  // An OTLP/HTTP endpoint must be a URL.
  EXPECT_FALSE(Read({{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318"}}).ok());
  // A CA file that is not there.
  absl::StatusOr<TracingOptions> tls = Read({{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"},
                                             {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
                                             {"OTEL_EXPORTER_OTLP_CERTIFICATE", "/nonexistent"}});
  ASSERT_TRUE(tls.ok());
  EXPECT_FALSE(tls->MakeTracer().ok());
}

}  // namespace
}  // namespace omnistage
