#include "tests/bench/counting_collector.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace bench {
namespace {

// A varint at `*at`; false past the end or when too long.
bool ReadVarint(absl::string_view bytes, size_t* at, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *at < bytes.size(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(bytes[(*at)++]);
    *value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// Calls `each` with the payload of every length-delimited field `field` of
// the message `bytes`, skipping the others; false when malformed.
template <typename Each>
bool ForEachField(absl::string_view bytes, uint64_t field, Each each) {
  size_t at = 0;
  while (at < bytes.size()) {
    uint64_t tag = 0, n = 0;
    if (!ReadVarint(bytes, &at, &tag)) return false;
    switch (tag & 7) {
      case 0:
        if (!ReadVarint(bytes, &at, &n)) return false;
        break;
      case 1:
        at += 8;
        break;
      case 5:
        at += 4;
        break;
      case 2:
        if (!ReadVarint(bytes, &at, &n) || n > bytes.size() - at) return false;
        if ((tag >> 3) == field && !each(bytes.substr(at, n))) return false;
        at += n;
        break;
      default:
        return false;
    }
  }
  return at == bytes.size();
}

// One call: the request's spans counted, an empty response.
class CountingReactor : public grpc::ServerGenericBidiReactor {
 public:
  explicit CountingReactor(std::atomic<int64_t>* spans) : spans_(spans) {
    grpc::Slice empty;
    response_ = grpc::ByteBuffer(&empty, 1);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
      return;
    }
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (request_.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    const int64_t n = CountingCollector::CountSpans(bytes);
    if (n < 0) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "not an ExportTraceServiceRequest"));
      return;
    }
    spans_->fetch_add(n, std::memory_order_relaxed);
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }
  void OnDone() override { delete this; }

 private:
  std::atomic<int64_t>* const spans_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;  // An ExportTraceServiceResponse: no bytes.
};

}  // namespace

CountingCollector::CountingCollector() {
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterCallbackGenericService(this);
  server_ = builder.BuildAndStart();
}

CountingCollector::~CountingCollector() {
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
}

std::string CountingCollector::endpoint() const { return absl::StrCat("http://127.0.0.1:", port_); }

int64_t CountingCollector::CountSpans(absl::string_view request) {
  int64_t spans = 0;
  const bool ok = ForEachField(request, 1, [&](absl::string_view resource_spans) {
    return ForEachField(resource_spans, 2, [&](absl::string_view scope_spans) {
      return ForEachField(scope_spans, 2, [&](absl::string_view) {
        ++spans;
        return true;
      });
    });
  });
  return ok ? spans : -1;
}

grpc::ServerGenericBidiReactor* CountingCollector::CreateReactor(
    grpc::GenericCallbackServerContext*) {
  return new CountingReactor(&spans_);
}

}  // namespace bench
}  // namespace omnistage
