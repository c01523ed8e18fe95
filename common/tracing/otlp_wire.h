// Protocol Buffers' wire format, written by hand for OTLP's few messages
// (protos/otlp/*.proto give the field numbers): a span is encoded once,
// straight into one string as it is recorded (span.h), and a batch of them
// is framed into an ExportTraceServiceRequest without decoding anything
// (otlp_exporter.h). Fields may come in any order: a message parser takes
// them as they come, the last of a scalar field winning.
//
//   std::string out;
//   AppendBytesField(&out, 5, "Generate");          // Span.name
//   AppendFixed64Field(&out, 7, UnixNanos(start));   // Span.start_time_unix_nano
#ifndef OMNISTAGE_COMMON_TRACING_OTLP_WIRE_H_
#define OMNISTAGE_COMMON_TRACING_OTLP_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace omnistage {

// The bytes `value` takes as a varint.
size_t VarintSize(uint64_t value);
// The bytes a length-delimited field of `length` bytes takes, its tag (for
// fields 1..15) and length included.
size_t BytesFieldSize(size_t length);

void AppendVarint(std::string* out, uint64_t value);
// A field's tag and, for a length-delimited one, the length that follows.
void AppendLengthPrefix(std::string* out, int field, size_t length);
void AppendBytesField(std::string* out, int field, absl::string_view bytes);
void AppendVarintField(std::string* out, int field, uint64_t value);
void AppendFixed64Field(std::string* out, int field, uint64_t value);
void AppendFixed32Field(std::string* out, int field, uint32_t value);
void AppendDoubleField(std::string* out, int field, double value);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_OTLP_WIRE_H_
