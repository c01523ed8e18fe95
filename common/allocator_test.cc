// The allocator the services use (the test links TCMalloc, as they do): 64 MiB
// allocated and touched counts as allocated; freed, it is cached and stays
// resident until ReleaseFreeMemory, and mostly leaves with it; the metrics say
// the same at a scrape. Under the sanitizer configs the allocator is the
// sanitizer's own, which keeps freed memory in quarantine: there only the
// calls' safety is checked.
#include "common/allocator.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

bool LinkedWithTcmalloc() {
  return dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory") != nullptr;
}

constexpr int64_t kMiB = 1 << 20;

// 64 MiB in blocks of 256 KiB, each written.
std::vector<std::unique_ptr<char[]>> Burst() {
  constexpr size_t kBlock = 256 << 10;
  std::vector<std::unique_ptr<char[]>> blocks;
  for (size_t i = 0; i < 256; ++i) {
    blocks.emplace_back(new char[kBlock]);
    std::memset(blocks.back().get(), 1, kBlock);
  }
  return blocks;
}

TEST(AllocatorTest, WhatABurstFreedIsCachedUntilReleased) {
  const HeapBytes start = HeapNow();
  std::vector<std::unique_ptr<char[]>> blocks = Burst();
  const HeapBytes held = HeapNow();
  blocks.clear();
  const HeapBytes freed = HeapNow();
  const int64_t resident_freed = ResidentBytes();
  ReleaseFreeMemory();
  const HeapBytes released = HeapNow();
  const int64_t resident_released = ResidentBytes();
  if (!LinkedWithTcmalloc()) GTEST_SKIP() << "not TCMalloc (a sanitizer build): calls checked only";
  EXPECT_GE(held.allocated - start.allocated, 64 * kMiB);
  EXPECT_LT(freed.allocated - start.allocated, 4 * kMiB);
  EXPECT_GE(freed.cached - start.cached, 48 * kMiB);
  EXPECT_LT(released.cached, freed.cached - 48 * kMiB);
  EXPECT_GT(resident_freed - resident_released, 48 * kMiB)
      << "resident " << resident_freed / kMiB << " MiB after the frees, "
      << resident_released / kMiB << " MiB after the release";
}

TEST(AllocatorTest, AScrapeReadsTheHeap) {
  MetricsRegistry registry;
  AddHeapMetrics(&registry);
  std::vector<std::unique_ptr<char[]>> blocks = Burst();
  const std::string text = registry.Render();
  EXPECT_THAT(text, ::testing::HasSubstr("# TYPE omnistage_heap_bytes gauge\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("omnistage_heap_bytes{state=\"cached\"} "));
  if (!LinkedWithTcmalloc()) GTEST_SKIP() << "not TCMalloc (a sanitizer build)";
  const size_t at = text.find("omnistage_heap_bytes{state=\"allocated\"} ");
  ASSERT_NE(at, std::string::npos) << text;
  const double allocated =
      std::stod(text.substr(at + std::strlen("omnistage_heap_bytes{state=\"allocated\"} ")));
  EXPECT_GE(allocated, 64.0 * kMiB);
}

}  // namespace
}  // namespace omnistage
