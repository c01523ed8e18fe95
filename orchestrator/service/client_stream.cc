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
  return options;
}

}  // namespace

ClientStream::ClientStream(Transport* transport, CancelFn cancel,
                           std::function<void(int64_t delta)> on_queued_bytes,
                           size_t max_queued_bytes)
    : cancel_(std::move(cancel)),
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
  v1::GenerateResponse response;
  size_t bytes = 0;
  for (v1::OutputChunk& chunk : chunks) {
    const size_t size = chunk.ByteSizeLong();
    if (response.outputs_size() > 0 && bytes + size > kMaxResponseBytes) {
      response.set_request_id(request_id);
      Write(request_id, std::move(response));
      response = v1::GenerateResponse();
      bytes = 0;
    }
    bytes += size;
    *response.add_outputs() = std::move(chunk);
  }
  if (response.outputs_size() == 0) return;
  response.set_request_id(request_id);
  Write(request_id, std::move(response));
}

void ClientStream::Finish(const std::string& request_id, v1::Terminal terminal) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
  }
  v1::GenerateResponse response;
  response.set_request_id(request_id);
  *response.mutable_terminal() = std::move(terminal);
  writer_.Write(std::move(response));
  writer_.End(absl::OkStatus());
}

void ClientStream::Fail(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return;
    ended_ = true;
  }
  writer_.End(status);
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
