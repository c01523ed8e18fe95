#include "common/allocator.h"

#include <dlfcn.h>
#include <malloc.h>

#include <cstddef>

namespace omnistage {
namespace {

// TCMalloc's C entry points, when the process runs on it. Looked up once: the
// allocator is fixed when the process starts.
struct Tcmalloc {
  using Release = void (*)();
  using Property = int (*)(const char* name, size_t* value);
  Release release =
      reinterpret_cast<Release>(dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory"));
  Property property =
      reinterpret_cast<Property>(dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty"));

  int64_t Get(const char* name) const {
    size_t value = 0;
    return property != nullptr && property(name, &value) ? static_cast<int64_t>(value) : 0;
  }
};

const Tcmalloc& TcmallocNow() {
  static const Tcmalloc* tcmalloc = new Tcmalloc();
  return *tcmalloc;
}

}  // namespace

void ReleaseFreeMemory() {
  if (TcmallocNow().release != nullptr) {
    TcmallocNow().release();
  } else {
    malloc_trim(0);
  }
}

HeapBytes HeapNow() {
  HeapBytes bytes;
  const Tcmalloc& tcmalloc = TcmallocNow();
  if (tcmalloc.property != nullptr) {
    bytes.allocated = tcmalloc.Get("generic.current_allocated_bytes");
    bytes.cached = tcmalloc.Get("tcmalloc.pageheap_free_bytes") +
                   tcmalloc.Get("tcmalloc.central_cache_free_bytes") +
                   tcmalloc.Get("tcmalloc.transfer_cache_free_bytes") +
                   tcmalloc.Get("tcmalloc.thread_cache_free_bytes");
    return bytes;
  }
  const struct mallinfo2 info = mallinfo2();
  bytes.allocated = static_cast<int64_t>(info.uordblks + info.hblkhd);
  bytes.cached = static_cast<int64_t>(info.fordblks);
  return bytes;
}

void AddHeapMetrics(MetricsRegistry* registry) {
  Family<Gauge>& heap = registry->AddGauge(
      "omnistage_heap_bytes",
      "The heap: bytes the process has allocated (state=allocated), and bytes its allocator "
      "keeps free for reuse without giving them back to the system (state=cached).",
      {"state"});
  Gauge& allocated = heap.With({"allocated"});
  Gauge& cached = heap.With({"cached"});
  registry->OnRender([&allocated, &cached] {
    const HeapBytes bytes = HeapNow();
    allocated.Set(static_cast<double>(bytes.allocated));
    cached.Set(static_cast<double>(bytes.cached));
  });
}

}  // namespace omnistage
