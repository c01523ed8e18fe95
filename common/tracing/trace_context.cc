#include "common/tracing/trace_context.h"

#include <random>

#include "absl/algorithm/container.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

bool LowerHex(absl::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool AllZero(absl::string_view bytes) {
  for (char c : bytes) {
    if (c != 0) return false;
  }
  return true;
}

}  // namespace

std::string RandomTraceBytes(size_t bytes) {
  thread_local std::mt19937_64 random = [] {
    std::random_device device;
    std::seed_seq seed{device(), device(), device(), device()};
    return std::mt19937_64(seed);
  }();
  std::string out(bytes, '\0');
  do {
    for (size_t i = 0; i < bytes; i += 8) {
      uint64_t draw = random();
      for (size_t j = i; j < bytes && j < i + 8; ++j, draw >>= 8) {
        out[j] = static_cast<char>(draw & 0xff);
      }
    }
  } while (AllZero(out));
  return out;
}

std::optional<TraceContext> TraceContext::Parse(absl::string_view traceparent,
                                                absl::string_view tracestate) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2.
  if (traceparent.size() < 55 || traceparent[2] != '-' || traceparent[35] != '-' ||
      traceparent[52] != '-') {
    return std::nullopt;
  }
  const absl::string_view version = traceparent.substr(0, 2);
  const absl::string_view trace_id = traceparent.substr(3, 32);
  const absl::string_view span_id = traceparent.substr(36, 16);
  const absl::string_view flags = traceparent.substr(53, 2);
  if (!LowerHex(version) || version == "ff" || !LowerHex(trace_id) || !LowerHex(span_id) ||
      !LowerHex(flags)) {
    return std::nullopt;
  }
  // Version 00 is exactly 55 characters; a later one may add fields after
  // a dash.
  if (traceparent.size() > 55 && (version == "00" || traceparent[55] != '-')) return std::nullopt;
  TraceContext context;
  context.trace_id = absl::HexStringToBytes(trace_id);
  context.span_id = absl::HexStringToBytes(span_id);
  if (AllZero(context.trace_id) || AllZero(context.span_id)) return std::nullopt;
  context.flags = static_cast<uint8_t>(absl::HexStringToBytes(flags)[0]);
  // W3C's tracestate is printable ASCII (what metadata and OTLP can carry).
  if (tracestate.size() <= kMaxTraceState &&
      absl::c_all_of(tracestate, [](char c) { return c >= 0x20 && c <= 0x7e; })) {
    context.trace_state = std::string(tracestate);
  }
  return context;
}

TraceContext TraceContext::NewRoot(uint8_t flags) {
  TraceContext context;
  context.trace_id = RandomTraceBytes(16);
  context.span_id = RandomTraceBytes(8);
  context.flags = flags;
  return context;
}

TraceContext TraceContext::Child() const {
  TraceContext child = *this;
  child.span_id = RandomTraceBytes(8);
  return child;
}

std::string TraceContext::Traceparent() const {
  const char flag_bytes[] = {static_cast<char>(flags)};
  return absl::StrCat("00-", absl::BytesToHexString(trace_id), "-", absl::BytesToHexString(span_id),
                      "-", absl::BytesToHexString(absl::string_view(flag_bytes, 1)));
}

std::string TraceContext::TraceIdHex() const { return absl::BytesToHexString(trace_id); }

std::string TraceIdOf(absl::string_view traceparent) {
  std::optional<TraceContext> context = TraceContext::Parse(traceparent);
  return context.has_value() ? context->TraceIdHex() : "";
}

}  // namespace omnistage
