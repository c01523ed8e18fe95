// The allocator seen from the program. The services allocate with TCMalloc
// (docs/build.md), which keeps what a burst freed for the next one; its entry
// points are looked up at run time (no build dependency on gperftools'
// headers), and glibc's stand in where it is absent (the sanitizer builds
// keep the default allocator).
#ifndef OMNISTAGE_COMMON_ALLOCATOR_H_
#define OMNISTAGE_COMMON_ALLOCATOR_H_

#include <cstdint>

#include "common/metrics.h"

namespace omnistage {

// Hands the memory the allocator holds free back to the system (TCMalloc's
// MallocExtension_ReleaseFreeMemory, else glibc's malloc_trim(0)). About a
// millisecond per tens of MiB released: call it when idle.
void ReleaseFreeMemory();

// What the heap holds: bytes the program has allocated, and bytes the
// allocator keeps free for reuse without giving them back (its caches and
// free pages). Resident memory is about their sum plus code and stacks.
struct HeapBytes {
  int64_t allocated = 0;
  int64_t cached = 0;
};
HeapBytes HeapNow();

// omnistage_heap_bytes{state="allocated"|"cached"}, read at every scrape.
void AddHeapMetrics(MetricsRegistry* registry);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_ALLOCATOR_H_
