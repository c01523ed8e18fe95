#include "orchestrator/core/request_tracing.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/modality.h"
#include "common/tracing/trace_context.h"

namespace omnistage {

RequestTracing::RequestTracing(const Tracer* tracer, CoreParts core)
    : tracer_(tracer), core_(core) {}

void RequestTracing::Admitted(InFlightRequest& r, absl::string_view method, int priority) {
  if (!enabled()) return;
  std::optional<TraceContext> parent = TraceContext::Parse(r.traceparent, r.tracestate);
  r.span = tracer_->Start(method, Span::Kind::kServer, parent ? &*parent : nullptr,
                          r.account.admitted());
  Span& span = r.span;
  // A trace of its own (no traceparent came): its lines carry its id from
  // here on.
  if (r.trace_id.empty() && span.started()) r.trace_id = span.context().TraceIdHex();
  span.Set("rpc.system", "grpc");
  span.Set("rpc.service", "omnistage.v1.Orchestrator");
  span.Set("rpc.method", method);
  span.Set("omnistage.request_id", r.id);
  if (!r.caller.empty()) span.Set("omnistage.identity", r.caller);
  span.Set("omnistage.priority", priority);
  if (r.objectives.criticality() != v1::CRITICALITY_UNSPECIFIED) {
    span.Set("omnistage.criticality", v1::Criticality_Name(r.objectives.criticality()));
  }
  r.stage_spans.resize(r.stages.size());
}

void RequestTracing::Refused(InFlightRequest& r, const absl::Status& error) {
  if (!r.span.started()) return;
  r.span.Set("rpc.grpc.status_code", static_cast<int>(error.code()));
  r.span.Error(error.message());
  tracer_->End(r.span, Now());
}

void RequestTracing::Queued(InFlightRequest& r) {
  if (!r.span.started()) return;
  r.queue_span = tracer_->Start("admission queue", Span::Kind::kInternal, &r.span.context(), Now());
}

void RequestTracing::LeftQueue(InFlightRequest& r) {
  if (r.queue_span.started()) tracer_->End(r.queue_span, Now());
}

std::string RequestTracing::StageStarting(InFlightRequest& r, int stage) {
  if (r.span.started() && stage < static_cast<int>(r.stage_spans.size()) &&
      !r.stage_spans[stage].span.started()) {
    Span& span = r.stage_spans[stage].span =
        tracer_->Start(absl::StrCat("stage ", core_.stage(stage).name), Span::Kind::kClient,
                       &r.span.context(), Now());
    span.Set("omnistage.stage", core_.stage(stage).name);
    span.Set("omnistage.stage_id", stage);
  }
  return TraceparentFor(r, stage);
}

InFlightRequest::StageSpan* RequestTracing::StageSpanOf(InFlightRequest& r, int stage) {
  if (stage < 0 || stage >= static_cast<int>(r.stage_spans.size())) return nullptr;
  InFlightRequest::StageSpan& stage_span = r.stage_spans[stage];
  return stage_span.span.started() ? &stage_span : nullptr;
}

void RequestTracing::StageSent(InFlightRequest& r, int stage, int replica) {
  InFlightRequest::StageSpan* stage_span = StageSpanOf(r, stage);
  if (stage_span == nullptr) return;
  Span& span = stage_span->span;
  span.Set("omnistage.replica", replica);
  span.Set("omnistage.instance_id", core_.pool(stage).state(replica).instance_id);
}

void RequestTracing::StageNotSent(InFlightRequest& r, int stage, absl::string_view error) {
  InFlightRequest::StageSpan* stage_span = StageSpanOf(r, stage);
  if (stage_span == nullptr) return;
  stage_span->span.Error(error);
  tracer_->End(stage_span->span, Now());
}

void RequestTracing::StageOutput(InFlightRequest& r, int stage, const v1::RequestOutput& output) {
  InFlightRequest::StageSpan* stage_span = StageSpanOf(r, stage);
  if (stage_span == nullptr) return;
  if (output.payloads_size() > 0 && !stage_span->output) {
    stage_span->output = true;
    stage_span->span.Event("first_output", Now());
  }
  if (output.finished()) tracer_->End(stage_span->span, Now());
}

void RequestTracing::InputComplete(InFlightRequest& r, int stage) {
  if (InFlightRequest::StageSpan* stage_span = StageSpanOf(r, stage)) {
    stage_span->span.Event("input_complete", Now());
  }
}

void RequestTracing::FailedOver(InFlightRequest& r, int stage, int from, absl::string_view why) {
  InFlightRequest::StageSpan* stage_span = StageSpanOf(r, stage);
  if (stage_span == nullptr) return;
  Span& span = stage_span->span;
  const int to = r.stages[stage].replica;
  span.Event("failover", Now(), "omnistage.failover",
             absl::StrCat("replica ", from, " -> ", to, ": ", why));
  span.Set("omnistage.replica", to);
  span.Set("omnistage.instance_id", core_.pool(stage).state(to).instance_id);
}

void RequestTracing::AbortRequested(InFlightRequest& r, absl::string_view by) {
  r.span.Event("abort_requested", Now(), "omnistage.by", by);
}

void RequestTracing::Cancelled(InFlightRequest& r) { r.span.Event("cancelled", Now()); }

void RequestTracing::Ended(InFlightRequest& r, const v1::FinishedRequest& record) {
  if (!r.span.started()) return;
  const absl::Time now = Now();
  const bool failed = record.finish_reason() == v1::FINISH_REASON_ERROR;
  LeftQueue(r);
  for (InFlightRequest::StageSpan& stage_span : r.stage_spans) {
    Span& stage = stage_span.span;
    if (!stage.started()) continue;
    // Still running when the request ended: its failure, or an abort.
    if (failed) stage.Error(record.error());
    tracer_->End(stage, now);
  }
  Span& span = r.span;
  span.Set("gen_ai.response.finish_reasons", FinishReasonName(record.finish_reason()));
  span.Set("gen_ai.usage.output_tokens", record.output_tokens());
  if (record.first_output_seconds() > 0) {
    span.Set("omnistage.first_output_seconds", record.first_output_seconds());
  }
  if (record.first_audio_seconds() > 0) {
    span.Set("omnistage.first_audio_seconds", record.first_audio_seconds());
  }
  if (record.audio_seconds() > 0) span.Set("omnistage.audio_seconds", record.audio_seconds());
  if (!record.objective_miss().empty()) {
    span.Set("omnistage.objective_miss", record.objective_miss());
  }
  if (failed) span.Error(record.error());
  tracer_->End(span, now);
}

}  // namespace omnistage
