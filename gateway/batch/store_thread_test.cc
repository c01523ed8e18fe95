#include "gateway/batch/store_thread.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gateway/batch/file_store.h"
#include "gateway/batch/test_store.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

// Tasks run one at a time, in the order posted, off the posting thread.
TEST(StoreThreadTest, RunsTasksInOrderOnItsOwnThread) {
  std::vector<int> order;
  std::thread::id ran_on;
  absl::Notification done;
  {
    StoreThread store(OpenTestStore("order.db"));
    for (int i = 0; i < 100; ++i) {
      store.Post([&order, &ran_on, i](SqliteDatabase&) {
        order.push_back(i);
        ran_on = std::this_thread::get_id();
      });
    }
    store.Post([&done](SqliteDatabase&) { done.Notify(); });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  }
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

// What was posted before the thread goes away still runs: a file uploaded
// as the gateway stops is stored.
TEST(StoreThreadTest, WhatWasPostedRunsBeforeItStops) {
  std::string id;
  absl::Notification hold;
  {
    StoreThread store(OpenTestStore("stop.db"));
    store.Post([&hold](SqliteDatabase&) { hold.WaitForNotification(); });
    store.Post([&id](SqliteDatabase& db) {
      absl::StatusOr<StoredFile> file = FileStore(&db).Create("alice", "batch", "a", "x");
      if (file.ok()) id = file->id;
    });
    EXPECT_EQ(store.pending(), 2u);
    hold.Notify();
  }
  EXPECT_FALSE(id.empty());
}

}  // namespace
}  // namespace omnistage
