// StreamWriter<Message>: the write side of one gRPC stream, shared by every
// stream omnistage writes (the orchestrator's Generate responses, its commands to
// a worker, a worker's events to an orchestrator).
//
// A gRPC reactor allows one write in flight. The writer keeps that one write
// going, queues what arrives meanwhile (folding queued messages into the next
// write when the owner gives a merge), and finishes the stream exactly once, after
// the last write completed. It never calls the transport while holding its lock
// (reactions may run inline), and never touches it after FinishStream().
//
//   StreamWriter<v1::WorkerEvent>::Options options;
//   options.label = "session 3";
//   StreamWriter<v1::WorkerEvent> writer(&transport, options);
//   writer.Write(event);          // any thread
//   writer.OnWriteDone(ok);       // from the reactor
//   writer.End(absl::OkStatus()); // finish once the queue is written
//
// Thread-safe.
#ifndef OMNISTAGE_COMMON_STREAM_WRITER_H_
#define OMNISTAGE_COMMON_STREAM_WRITER_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace omnistage {

template <typename Message>
class StreamWriter {
 public:
  // The reactor side, called outside the writer's lock.
  class Transport {
   public:
    virtual ~Transport() = default;
    // Starts a write; `message` stays valid until the writer's OnWriteDone().
    virtual void BeginWrite(const Message* message) = 0;
    // Ends the stream; called once, with no write in flight, and last.
    virtual void FinishStream(const absl::Status& status) = 0;
    // Breaks the stream now: the write in flight (if any) fails.
    virtual void CancelStream() = 0;
    // Only with Options::write_and_finish: starts the last write and ends the
    // stream with `status` in one step (gRPC's StartWriteAndFinish); neither
    // OnWriteDone nor FinishStream follows. Called once, with no write in
    // flight, and last.
    virtual void BeginWriteAndFinish(const Message* message, const absl::Status& status) {
      BeginWrite(message);
      FinishStream(status);  // Unreachable with a transport that says it can.
    }
  };

  struct Options {
    // Names the stream in the statuses the writer makes, e.g. "session 3".
    std::string label = "stream";
    // More queued messages than this and the peer is taken to have stopped
    // reading: the stream is cancelled and ends with RESOURCE_EXHAUSTED.
    // 0: no bound.
    size_t max_queued = 0;
    // Likewise for the bytes queued (Message::ByteSizeLong()); 0: no bound.
    // The status then says "too slow" with both figures.
    size_t max_queued_bytes = 0;
    // When set, queued messages are folded into the next write in order
    // (`merge(into, next)`) while the write stays within max_write_bytes
    // (Message::ByteSizeLong()) and merge agrees: it returns false, leaving
    // both untouched, for a `next` that cannot join `into` (it then starts the
    // following write). It may move from `next` only when it returns true. The
    // first message of a write always goes.
    std::function<bool(Message& into, Message& next)> merge;
    size_t max_write_bytes = 0;
    // Hears the change of the bytes waiting in the queue (not the write in
    // flight): + when a message queues, - when it is written or dropped. Sizes
    // are Message::ByteSizeLong(). Called outside the writer's lock.
    std::function<void(int64_t delta)> on_queued_bytes = [](int64_t) {};
    // The transport implements BeginWriteAndFinish: the last write of a stream
    // that is ending carries its end too (one step for the peer and for gRPC's
    // threads instead of two).
    bool write_and_finish = false;
  };

  StreamWriter(Transport* transport, Options options)
      : transport_(transport), options_(std::move(options)) {}
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Writes `message` now or after the queued ones, moving from it. False if it
  // was not taken (then `message` is left as it was): the stream is ending, or
  // the queue is over a bound (then the stream is abandoned with
  // RESOURCE_EXHAUSTED).
  bool Write(Message&& message) {
    const Message* start = nullptr;
    size_t queued = 0;
    size_t over_bytes = 0;  // What the queue would hold past max_queued_bytes.
    int64_t added = -1;  // Bytes queued; -1: not queued.
    {
      absl::MutexLock lock(&mu_);
      if (ending_) return false;
      if (!writing_) {
        in_flight_ = std::move(message);
        writing_ = true;
        start = &in_flight_;
      } else if (options_.max_queued == 0 || queue_.size() < options_.max_queued) {
        const size_t bytes = message.ByteSizeLong();
        if (options_.max_queued_bytes > 0 && queued_bytes_ + bytes > options_.max_queued_bytes) {
          over_bytes = queued_bytes_ + bytes;
        } else {
          queue_.emplace_back(std::move(message), bytes);
          queued_bytes_ += bytes;
          added = static_cast<int64_t>(bytes);
        }
      } else {
        queued = queue_.size();
      }
    }
    if (over_bytes > 0) {
      Abandon(absl::ResourceExhaustedError(absl::StrCat(
          options_.label, ": the peer reads too slowly: ", over_bytes,
          " bytes would be queued (limit ", options_.max_queued_bytes, ")")));
      return false;
    }
    if (added >= 0) {
      options_.on_queued_bytes(added);
      return true;
    }
    if (start != nullptr) {
      transport_->BeginWrite(start);
      return true;
    }
    Abandon(absl::ResourceExhaustedError(absl::StrCat(
        options_.label, ": the peer is not reading; ", queued, " messages queued")));
    return false;
  }

  // Writes `message` after the queued ones and finishes the stream with
  // `status` (the first End or Abandon decides the status): Write, then End, in
  // one step where the transport can. False (and `message` untouched) if the
  // stream is already ending. The last message is not held to the bounds.
  bool WriteLast(Message&& message, absl::Status status) {
    const Message* start = nullptr;
    bool finish = false;
    int64_t added = -1;
    {
      absl::MutexLock lock(&mu_);
      if (ending_) return false;
      ending_ = true;
      status_ = std::move(status);
      if (!writing_) {
        in_flight_ = std::move(message);
        writing_ = true;
        start = &in_flight_;
        finish = options_.write_and_finish;
        finished_ = finish;
      } else {
        const size_t bytes = message.ByteSizeLong();
        queue_.emplace_back(std::move(message), bytes);
        queued_bytes_ += bytes;
        added = static_cast<int64_t>(bytes);
      }
      status = status_;
    }
    if (added >= 0) options_.on_queued_bytes(added);
    if (start != nullptr && finish) {
      transport_->BeginWriteAndFinish(start, status);
    } else if (start != nullptr) {
      transport_->BeginWrite(start);
    }
    return true;
  }

  // The reactor's OnWriteDone. A failed write ends the stream (CANCELLED): the
  // peer is gone and nothing more can be written.
  void OnWriteDone(bool ok) {
    const Message* start = nullptr;
    bool start_and_finish = false;
    bool finish = false;
    absl::Status status;
    int64_t delta = 0;
    {
      absl::MutexLock lock(&mu_);
      const size_t before = queued_bytes_;
      writing_ = false;
      if (!ok) {
        ClearQueueLocked();
        if (!ending_) {
          ending_ = true;
          status_ = absl::CancelledError(absl::StrCat(options_.label, ": the stream broke"));
        }
      }
      if (!queue_.empty()) {
        in_flight_ = TakeNextLocked();
        writing_ = true;
        start = &in_flight_;
        // The last message of an ending stream carries its end.
        if (ending_ && queue_.empty() && options_.write_and_finish && cancelling_ == 0) {
          finished_ = true;
          start_and_finish = true;
          status = status_;
        }
      } else {
        finish = TakeFinishLocked();
        status = status_;
      }
      delta = static_cast<int64_t>(queued_bytes_) - static_cast<int64_t>(before);
    }
    if (delta != 0) options_.on_queued_bytes(delta);
    if (start_and_finish) {
      transport_->BeginWriteAndFinish(start, status);
    } else if (start != nullptr) {
      transport_->BeginWrite(start);
    }
    if (finish) transport_->FinishStream(status);
  }

  // Finishes the stream with `status` once the queued messages are written. The
  // first End or Abandon decides the status.
  void End(absl::Status status) {
    bool finish;
    {
      absl::MutexLock lock(&mu_);
      if (!ending_) {
        ending_ = true;
        status_ = std::move(status);
      }
      finish = TakeFinishLocked();
      status = status_;
    }
    if (finish) transport_->FinishStream(status);
  }

  // Drops the queue, cancels the stream and finishes it with `status` once the
  // write in flight failed.
  void Abandon(absl::Status status) {
    size_t dropped = 0;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      if (!ending_) {
        ending_ = true;
        status_ = std::move(status);
      }
      dropped = queued_bytes_;
      ClearQueueLocked();
      ++cancelling_;  // Keeps the stream from finishing under CancelStream() below.
    }
    if (dropped > 0) options_.on_queued_bytes(-static_cast<int64_t>(dropped));
    transport_->CancelStream();
    bool finish;
    {
      absl::MutexLock lock(&mu_);
      --cancelling_;
      finish = TakeFinishLocked();
      status = status_;
    }
    if (finish) transport_->FinishStream(status);
  }

  // True once End or Abandon was called or a write failed: writes are dropped.
  bool ending() const {
    absl::MutexLock lock(&mu_);
    return ending_;
  }
  // Why it is ending (OK while it is not): RESOURCE_EXHAUSTED when a write went
  // over a bound, CANCELLED when a write failed, else End's status.
  absl::Status ending_status() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  bool Merging() const { return options_.merge != nullptr; }

  Message TakeNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Message next = std::move(queue_.front().first);
    size_t bytes = queue_.front().second;
    queue_.pop_front();
    while (Merging() && !queue_.empty() &&
           bytes + queue_.front().second <= options_.max_write_bytes &&
           options_.merge(next, queue_.front().first)) {
      bytes += queue_.front().second;
      queue_.pop_front();
    }
    queued_bytes_ -= bytes;
    return next;
  }

  void ClearQueueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    queue_.clear();
    queued_bytes_ = 0;
  }

  bool TakeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!ending_ || writing_ || cancelling_ > 0 || finished_) return false;
    finished_ = true;
    return true;
  }

  Transport* const transport_;
  const Options options_;

  mutable absl::Mutex mu_;
  // (message, its ByteSizeLong()), oldest first; and their sum.
  std::deque<std::pair<Message, size_t>> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Assigned under mu_ only while no write is in flight; read by that write.
  Message in_flight_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  int cancelling_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_STREAM_WRITER_H_
