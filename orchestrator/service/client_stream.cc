#include "orchestrator/service/client_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace omnistage {
namespace {

StreamWriter<v1::GenerateResponse>::Options WriterOptions(
    std::function<void(int64_t)> on_queued_bytes, size_t max_queued_bytes) {
  StreamWriter<v1::GenerateResponse>::Options options;
  options.on_queued_bytes = std::move(on_queued_bytes);
  options.max_queued_bytes = max_queued_bytes;
  options.label = "Generate stream";
  options.merge = [](v1::GenerateResponse& into, v1::GenerateResponse& next) {
    for (v1::OutputChunk& chunk : *next.mutable_outputs()) *into.add_outputs() = std::move(chunk);
    if (next.has_terminal()) *into.mutable_terminal() = std::move(*next.mutable_terminal());
    return true;
  };
  options.max_write_bytes = ClientStream::kMaxResponseBytes;
  options.write_and_finish = true;
  return options;
}

}  // namespace

ClientStream::ClientStream(Transport* transport, CancelFn cancel,
                           std::function<void(int64_t delta)> on_queued_bytes,
                           size_t max_queued_bytes, DeferFn defer)
    : cancel_(std::move(cancel)),
      defer_(std::move(defer)),
      writer_(transport, WriterOptions(std::move(on_queued_bytes), max_queued_bytes)),
      max_queued_bytes_(max_queued_bytes) {}

void ClientStream::Write(const std::string& request_id, v1::GenerateResponse response) {
  if (writer_.Write(std::move(response))) return;
  {
    absl::MutexLock lock(&mu_);
    if (refused_ || ended_) return;
    refused_ = true;
  }
  // A write refused because the stream already ends (the client went away,
  // the request ended) says nothing about the client's reading.
  if (max_queued_bytes_ > 0 &&
      writer_.ending_status().code() == absl::StatusCode::kResourceExhausted) {
    LogWarning({request_id, -1, -1, ""},
               absl::StrCat("the client reads too slowly (over ", max_queued_bytes_,
                            " bytes of responses queued): cancelling its call and the request"));
  }
}

std::string ClientStream::request_id() const {
  absl::MutexLock lock(&mu_);
  return request_id_;
}

void ClientStream::Started(const std::string& request_id) {
  bool cancelled;
  {
    absl::MutexLock lock(&mu_);
    request_id_ = request_id;
    cancelled = cancelled_;
  }
  if (cancelled) cancel_(shared_from_this(), request_id);
}

void ClientStream::Send(const std::string& request_id, std::vector<v1::OutputChunk> chunks) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
  }
  // Responses of at most about kMaxResponseBytes each (a larger chunk goes alone);
  // the writer merges them again while they queue.
  if (chunks.empty()) return;
  for (v1::OutputChunk& chunk : chunks) {
    const size_t size = chunk.ByteSizeLong();
    if (pending_.empty() || (pending_.back().outputs_size() > 0 &&
                             pending_back_bytes_ + size > kMaxResponseBytes)) {
      pending_.emplace_back().set_request_id(request_id);
      pending_back_bytes_ = 0;
    }
    pending_back_bytes_ += size;
    *pending_.back().add_outputs() = std::move(chunk);
  }
  pending_id_ = request_id;
  FlushLater();
}

void ClientStream::Finish(const std::string& request_id, v1::Terminal terminal) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
  }
  pending_terminal_ = std::move(terminal);
  pending_id_ = request_id;
  FlushLater();
}

void ClientStream::Fail(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
  }
  Flush();  // Whatever was sent goes first.
  writer_.End(status);
}

void ClientStream::FlushLater() {
  if (flush_deferred_) return;
  flush_deferred_ = true;
  defer_([self = shared_from_this()] { self->Flush(); });
}

void ClientStream::Flush() {
  flush_deferred_ = false;
  std::vector<v1::GenerateResponse> responses;
  responses.swap(pending_);
  std::optional<v1::Terminal> terminal;
  terminal.swap(pending_terminal_);
  const bool last = terminal.has_value();
  if (last) {
    // The terminal rides with the last chunks within the response size (else
    // alone, after them), and the call's end with it.
    if (responses.empty() ||
        pending_back_bytes_ + terminal->ByteSizeLong() > kMaxResponseBytes) {
      responses.emplace_back().set_request_id(pending_id_);
    }
    *responses.back().mutable_terminal() = std::move(*terminal);
  }
  for (size_t i = 0; i < responses.size(); ++i) {
    if (last && i + 1 == responses.size()) {
      writer_.WriteLast(std::move(responses[i]), absl::OkStatus());
    } else {
      Write(pending_id_, std::move(responses[i]));
    }
  }
}

void ClientStream::OnCancel() {
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    id = request_id_;
  }
  if (!id.empty()) cancel_(shared_from_this(), id);  // Else Started() sees `cancelled_`.
}

}  // namespace omnistage
