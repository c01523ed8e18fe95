// What tests read of an exported span: an attribute's value as text ("" when
// absent), and its events' names in order.
//
//   EXPECT_EQ(AttributeOf(span, "omnistage.replica"), "1");
//   EXPECT_THAT(EventNamesOf(span), ElementsAre("first_output"));
#ifndef OMNISTAGE_COMMON_TRACING_TESTING_SPAN_FIELDS_H_
#define OMNISTAGE_COMMON_TRACING_TESTING_SPAN_FIELDS_H_

#include <string>
#include <vector>

#include "protos/otlp/trace.pb.h"

namespace omnistage {

// A string as it is; an integer, double or bool written out.
std::string AttributeOf(const opentelemetry::proto::trace::v1::Span& span, const std::string& key);
std::vector<std::string> EventNamesOf(const opentelemetry::proto::trace::v1::Span& span);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_TESTING_SPAN_FIELDS_H_
