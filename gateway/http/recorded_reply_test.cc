#include "gateway/http/recorded_reply.h"

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

// A loop: tasks posted run when asked.
struct Loop {
  std::deque<std::function<void()>> tasks;
  RecordedReply::Poster poster() {
    return [this](std::function<void()> task) { tasks.push_back(std::move(task)); };
  }
  void RunAll() {
    while (!tasks.empty()) {
      std::function<void()> task = std::move(tasks.front());
      tasks.pop_front();
      task();
    }
  }
};

TEST(RecordedReplyTest, KeepsAWholeResponseAndSaysOnce) {
  Loop loop;
  int ended = 0;
  RecordedReply reply(loop.poster(), [&](const RecordedReply& r) {
    ++ended;
    EXPECT_EQ(r.status(), 400);
    EXPECT_EQ(r.body(), R"({"error": {}})");
  });
  reply.AddHeader("Retry-After", "1");
  reply.Respond(400, "application/json", R"({"error": {}})");
  reply.Respond(200, "text/plain", "again");  // after the end: nothing
  EXPECT_EQ(ended, 1);
  EXPECT_TRUE(reply.done());
  EXPECT_FALSE(reply.closed());
  ASSERT_EQ(reply.headers().size(), 1u);
  EXPECT_EQ(reply.headers()[0].first, "Retry-After");
}

// A stream's chunks are joined; each flushed hook runs later on the loop,
// never inside Send (a producer reading its next response from there would
// recurse).
TEST(RecordedReplyTest, JoinsAStreamAndRunsFlushedHooksOnTheLoop) {
  Loop loop;
  std::string body;
  RecordedReply reply(loop.poster(), [&](const RecordedReply& r) { body = r.body(); });
  int flushed = 0;
  reply.StartStream(200, "text/event-stream");
  EXPECT_TRUE(reply.streaming());
  reply.Send("data: 1\n\n", [&] { ++flushed; });
  reply.Send("data: 2\n\n", [&] { ++flushed; });
  EXPECT_EQ(flushed, 0);
  loop.RunAll();
  EXPECT_EQ(flushed, 2);
  reply.EndStream();
  EXPECT_EQ(body, "data: 1\n\ndata: 2\n\n");
}

TEST(RecordedReplyTest, CloseCancelsTheCallAndEndsIt) {
  Loop loop;
  bool cancelled = false;
  bool closed = false;
  RecordedReply reply(loop.poster(), [&](const RecordedReply& r) { closed = r.closed(); });
  reply.OnClose([&] { cancelled = true; });
  reply.Close();
  EXPECT_TRUE(cancelled);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(reply.done());
  // A response once it ended: no hook, no second end.
  RecordedReply answered(loop.poster(), nullptr);
  bool hooked = false;
  answered.OnClose([&] { hooked = true; });
  answered.Respond(200, "application/json", "{}");
  answered.Close();
  EXPECT_FALSE(hooked);
  EXPECT_FALSE(answered.closed());
}

}  // namespace
}  // namespace omnistage
