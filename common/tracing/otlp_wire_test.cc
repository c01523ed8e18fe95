// A span written by hand into the wire format reads back, through the
// messages generated from OTLP's .proto files, as what was recorded.
#include "common/tracing/otlp_wire.h"

#include <string>

#include "absl/time/clock.h"
#include "common/tracing/span.h"
#include "gtest/gtest.h"
#include "protos/otlp/trace.pb.h"

namespace omnistage {
namespace {

using Proto = opentelemetry::proto::trace::v1::Span;

TraceContext Sampled() {
  TraceContext context;
  context.trace_id = std::string(16, '\x01');
  context.span_id = std::string(8, '\x02');
  context.flags = TraceContext::kSampled;
  context.trace_state = "vendor=x";
  return context;
}

Proto Decoded(const std::string& record) {
  Proto proto;
  EXPECT_TRUE(proto.ParseFromString(record));
  return proto;
}

const opentelemetry::proto::common::v1::AnyValue* Attribute(const Proto& span,
                                                            const std::string& key) {
  const opentelemetry::proto::common::v1::AnyValue* found = nullptr;
  for (const auto& attribute : span.attributes()) {
    if (attribute.key() == key) {
      EXPECT_EQ(found, nullptr) << key << " twice";
      found = &attribute.value();
    }
  }
  return found;
}

const google::protobuf::UnknownFieldSet& Unknown(const google::protobuf::Message& message) {
  return message.GetReflection()->GetUnknownFields(message);
}

TEST(OtlpWireTest, VarintsTakeSevenBitsABytes) {
  std::string out;
  AppendVarint(&out, 300);
  EXPECT_EQ(out, std::string("\xac\x02", 2));
  EXPECT_EQ(VarintSize(0), 1u);
  EXPECT_EQ(VarintSize(127), 1u);
  EXPECT_EQ(VarintSize(128), 2u);
  EXPECT_EQ(VarintSize(~uint64_t{0}), 10u);
}

TEST(OtlpWireTest, ASpanReadsBackAsRecorded) {
  const absl::Time start = absl::FromUnixNanos(1700000000123456789);
  Span span("Generate", Span::Kind::kServer, Sampled(), std::string(8, '\x03'), start);
  span.Set("rpc.system", "grpc");
  span.Set("omnistage.priority", 5);
  span.Set("omnistage.delta", int64_t{-7});
  span.Set("omnistage.first_output_seconds", 0.25);
  span.Set("omnistage.failover", true);
  // A value long enough for a length of two and three varint bytes.
  span.Set("omnistage.long", std::string(300, 'x'));
  span.Set("omnistage.longer", std::string(20000, 'y'));
  span.Event("first_output", start + absl::Milliseconds(5));
  span.Event("abort_requested", start + absl::Milliseconds(6), "omnistage.by", "alice");
  span.Error("the replica went away");
  const std::string record = span.End(start + absl::Milliseconds(9));
  EXPECT_FALSE(span.recording());
  EXPECT_EQ(span.End(start), "");

  const Proto proto = Decoded(record);
  EXPECT_EQ(proto.trace_id(), std::string(16, '\x01'));
  EXPECT_EQ(proto.span_id(), std::string(8, '\x02'));
  EXPECT_EQ(proto.parent_span_id(), std::string(8, '\x03'));
  EXPECT_EQ(proto.trace_state(), "vendor=x");
  EXPECT_EQ(proto.flags(), TraceContext::kSampled);
  EXPECT_EQ(proto.name(), "Generate");
  EXPECT_EQ(proto.kind(), Proto::SPAN_KIND_SERVER);
  EXPECT_EQ(proto.start_time_unix_nano(), 1700000000123456789u);
  EXPECT_EQ(proto.end_time_unix_nano(), 1700000000132456789u);
  ASSERT_EQ(proto.attributes_size(), 7);
  EXPECT_EQ(Attribute(proto, "rpc.system")->string_value(), "grpc");
  EXPECT_EQ(Attribute(proto, "omnistage.priority")->int_value(), 5);
  EXPECT_EQ(Attribute(proto, "omnistage.delta")->int_value(), -7);
  EXPECT_EQ(Attribute(proto, "omnistage.first_output_seconds")->double_value(), 0.25);
  EXPECT_TRUE(Attribute(proto, "omnistage.failover")->bool_value());
  EXPECT_EQ(Attribute(proto, "omnistage.long")->string_value(), std::string(300, 'x'));
  EXPECT_EQ(Attribute(proto, "omnistage.longer")->string_value(), std::string(20000, 'y'));
  ASSERT_EQ(proto.events_size(), 2);
  EXPECT_EQ(proto.events(0).name(), "first_output");
  EXPECT_EQ(proto.events(0).time_unix_nano(), 1700000000128456789u);
  EXPECT_EQ(proto.events(0).attributes_size(), 0);
  EXPECT_EQ(proto.events(1).name(), "abort_requested");
  ASSERT_EQ(proto.events(1).attributes_size(), 1);
  EXPECT_EQ(proto.events(1).attributes(0).key(), "omnistage.by");
  EXPECT_EQ(proto.events(1).attributes(0).value().string_value(), "alice");
  EXPECT_EQ(proto.status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(proto.status().message(), "the replica went away");
  // Every field landed where the .proto puts it: a wrong field number or
  // wire type would be kept aside as unknown.
  EXPECT_TRUE(Unknown(proto).empty());
  for (const auto& attribute : proto.attributes()) {
    EXPECT_TRUE(Unknown(attribute).empty()) << attribute.key();
    EXPECT_TRUE(Unknown(attribute.value()).empty()) << attribute.key();
  }
  for (const auto& event : proto.events()) EXPECT_TRUE(Unknown(event).empty()) << event.name();
  EXPECT_TRUE(Unknown(proto.status()).empty());
}

TEST(OtlpWireTest, AKeySetAgainTakesTheNewValueWhateverCameBetween) {
  const absl::Time start = absl::FromUnixSeconds(1700000000);
  Span span("stage thinker", Span::Kind::kClient, Sampled(), "", start);
  span.Set("omnistage.replica", 0);
  span.Set("omnistage.instance_id", "a-1");
  span.Event("failover", start, "omnistage.failover", "replica 0 -> 1: gone");
  span.Set("omnistage.replica", 1);
  span.Set("omnistage.instance_id", "b-22222222222222222222");
  span.Set("omnistage.instance_id", "c");
  span.Set("omnistage.stage", "thinker");
  const Proto proto = Decoded(span.End(start));
  EXPECT_TRUE(proto.parent_span_id().empty());
  EXPECT_EQ(proto.kind(), Proto::SPAN_KIND_CLIENT);
  ASSERT_EQ(proto.attributes_size(), 3);
  EXPECT_EQ(Attribute(proto, "omnistage.replica")->int_value(), 1);
  EXPECT_EQ(Attribute(proto, "omnistage.instance_id")->string_value(), "c");
  EXPECT_EQ(Attribute(proto, "omnistage.stage")->string_value(), "thinker");
  ASSERT_EQ(proto.events_size(), 1);
  EXPECT_EQ(proto.events(0).attributes(0).value().string_value(), "replica 0 -> 1: gone");
  EXPECT_FALSE(proto.has_status());
}

TEST(OtlpWireTest, ASpanNotSampledRecordsNothing) {
  TraceContext context = Sampled();
  context.flags = 0;
  Span span("Generate", Span::Kind::kServer, context, "", absl::Now());
  span.Set("rpc.system", "grpc");
  span.Event("cancelled", absl::Now());
  EXPECT_TRUE(span.started());
  EXPECT_FALSE(span.recording());
  EXPECT_EQ(span.End(absl::Now()), "");
}

}  // namespace
}  // namespace omnistage
