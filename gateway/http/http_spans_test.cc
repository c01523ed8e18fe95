// Each HTTP request's server span (docs/observability.md, "Traces"): under
// the client's traceparent, named by its route, ended with its status (a 5xx
// an error), and the traceparent passed on to the orchestrator is its own.
// Real sockets on loopback; the spans are read from what the exporter sends.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/tracing/testing/keeping_transport.h"
#include "common/tracing/testing/span_fields.h"
#include "gateway/http/forwarded_headers.h"
#include "gateway/http/http_server.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace omnistage {
namespace {

constexpr char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

// The trace headers the orchestrator would be sent, as "traceparent|tracestate".
std::string Forwarded(const HttpExchange& exchange) {
  const TraceHeaders trace = std::get<ForwardedHeaders>(ForwardedHeadersOf(exchange)).trace;
  return trace.traceparent + "|" + trace.tracestate;
}

TEST(HttpSpansTest, EachRequestIsASpanUnderTheClientsAndPassesItsOwnContextOn) {
  KeepingTracer traced;
  absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Listen("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->set_tracer(&traced.tracer());
  (*server)->Serve([](std::shared_ptr<HttpExchange> x) {
    if (x->path() == "/v1/chat/completions") {
      // What the orchestrator would be sent.
      x->Respond(200, "text/plain", Forwarded(*x));
    } else if (x->path() == "/v1/audio/speech") {
      x->StartStream(200, "audio/wav");
      x->Send("RIFF");
      x->EndStream();
    } else if (x->path() == "/v1/fail") {
      x->Respond(503, "text/plain", "busy");
    } else {
      x->Respond(404, "text/plain", "no such path");
    }
  });
  httplib::Client client("127.0.0.1", (*server)->port());
  httplib::Headers headers = {
      {"traceparent", kTraceparent}, {"tracestate", "vendor=opaque"}, {"User-Agent", "test-agent"}};
  httplib::Result chat = client.Post("/v1/chat/completions", headers, "{}", "application/json");
  ASSERT_TRUE(chat);
  const std::string passed_on = chat->body;
  ASSERT_TRUE(client.Post("/v1/audio/speech", headers, "{}", "application/json"));
  ASSERT_TRUE(client.Get("/v1/fail", headers));
  ASSERT_TRUE(client.Get("/some/stray/path", headers));
  (*server)->Stop();

  std::map<std::string, SpanProto> by_name;
  for (const SpanProto& span : traced.Flush()) by_name[span.name()] = span;
  ASSERT_EQ(by_name.size(), 4u);
  const SpanProto& chat_span = by_name["POST /v1/chat/completions"];
  EXPECT_EQ(chat_span.kind(), SpanProto::SPAN_KIND_SERVER);
  EXPECT_EQ(absl::BytesToHexString(chat_span.trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(absl::BytesToHexString(chat_span.parent_span_id()), "00f067aa0ba902b7");
  EXPECT_EQ(chat_span.trace_state(), "vendor=opaque");
  EXPECT_EQ(AttributeOf(chat_span, "http.request.method"), "POST");
  EXPECT_EQ(AttributeOf(chat_span, "http.route"), "/v1/chat/completions");
  EXPECT_EQ(AttributeOf(chat_span, "http.response.status_code"), "200");
  EXPECT_EQ(AttributeOf(chat_span, "user_agent.original"), "test-agent");
  // The orchestrator's span will be this one's child, the tracestate kept.
  const std::vector<std::string> sent_headers = absl::StrSplit(passed_on, '|');
  ASSERT_EQ(sent_headers.size(), 2u) << passed_on;
  EXPECT_EQ(sent_headers[1], "vendor=opaque");
  std::optional<TraceContext> sent = TraceContext::Parse(sent_headers[0]);
  ASSERT_TRUE(sent.has_value()) << passed_on;
  EXPECT_EQ(sent->span_id, chat_span.span_id());
  EXPECT_EQ(sent->trace_id, chat_span.trace_id());

  EXPECT_EQ(AttributeOf(by_name["POST /v1/audio/speech"], "http.response.status_code"), "200");
  const SpanProto& failed = by_name["GET /v1/fail"];
  EXPECT_EQ(failed.status().code(), opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  // A stray path is named by its method alone.
  ASSERT_EQ(by_name.count("GET"), 1u);
  EXPECT_EQ(AttributeOf(by_name["GET"], "http.response.status_code"), "404");
  EXPECT_EQ(by_name["GET"].status().code(),
            opentelemetry::proto::trace::v1::Status::STATUS_CODE_UNSET);
}

TEST(HttpSpansTest, WithTracingOffTheClientsTraceContextGoesOnAsItCame) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start("127.0.0.1:0", [](std::shared_ptr<HttpExchange> x) {
        EXPECT_FALSE(x->span().started());
        x->Respond(200, "text/plain", Forwarded(*x));
      });
  ASSERT_TRUE(server.ok());
  httplib::Client client("127.0.0.1", (*server)->port());
  auto post = [&](const httplib::Headers& headers) {
    httplib::Result got = client.Post("/v1/chat/completions", headers, "{}", "application/json");
    return got ? got->body : "no answer";
  };
  EXPECT_EQ(post({{"traceparent", kTraceparent}, {"tracestate", "a=1, b=2"}}),
            absl::StrCat(kTraceparent, "|a=1, b=2"));
  EXPECT_EQ(post({{"traceparent", kTraceparent}}), absl::StrCat(kTraceparent, "|"));
  // A malformed traceparent goes nowhere, nor its tracestate.
  EXPECT_EQ(post({{"traceparent", "00-garbage"}, {"tracestate", "a=1"}}), "|");
  (*server)->Stop();
}

}  // namespace
}  // namespace omnistage
