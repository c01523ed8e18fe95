#include "stage_worker/engines/python/python_prefix_cache.h"

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/prefix_blocks.h"

namespace py = pybind11;

namespace omnistage {
namespace {

// `value` as an int in [low, high] (a bool is no int here).
bool IntIn(PyObject* value, int64_t low, int64_t high, int64_t* out) {
  if (!PyLong_Check(value) || PyBool_Check(value)) return false;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  if (overflow != 0 || v < low || v > high) return false;
  *out = v;
  return true;
}

// The items of a tuple or list of `size` items, or nullptr.
PyObject** Items(py::handle value, Py_ssize_t size) {
  if (!PyTuple_Check(value.ptr()) && !PyList_Check(value.ptr())) return nullptr;
  if (PySequence_Fast_GET_SIZE(value.ptr()) != size) return nullptr;
  return PySequence_Fast_ITEMS(value.ptr());
}

// `value` as a block name: an int in [0, 2**64).
bool BlockFromPython(PyObject* value, uint64_t* block) {
  if (!PyLong_Check(value) || PyBool_Check(value)) return false;
  const unsigned long long v = PyLong_AsUnsignedLongLong(value);
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  *block = v;
  return true;
}

std::string Repr(py::handle value) { return py::repr(value); }

}  // namespace

absl::StatusOr<PrefixCacheLayout> ReadPrefixCache(const py::object& instance,
                                                  const std::string& qualified) {
  py::object declared = py::getattr(instance, "prefix_cache", py::none());
  if (PyCallable_Check(declared.ptr())) declared = declared();
  if (declared.is_none()) return PrefixCacheLayout();
  PyObject** items = Items(declared, 2);
  int64_t block_tokens = 0;
  int64_t capacity_blocks = 0;
  if (items == nullptr || !IntIn(items[0], 1, kMaxBlockTokens, &block_tokens) ||
      !IntIn(items[1], 1, std::numeric_limits<int32_t>::max(), &capacity_blocks)) {
    return absl::InvalidArgumentError(absl::StrCat(
        qualified, ".prefix_cache is ", Repr(declared),
        " (expected (block_tokens, capacity_blocks), ints in [1, ", kMaxBlockTokens, "] and [1, ",
        std::numeric_limits<int32_t>::max(), "], or None for no prefix cache)"));
  }
  if (!PyCallable_Check(py::getattr(instance, "prefix_cache_stats", py::none()).ptr())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "class ", qualified, " declares a prefix_cache but has no method 'prefix_cache_stats'"));
  }
  py::object changes = py::getattr(instance, "take_cache_changes", py::none());
  if (!changes.is_none() && !PyCallable_Check(changes.ptr())) {
    return absl::InvalidArgumentError(absl::StrCat(qualified, ".take_cache_changes is ",
                                                   Repr(changes), " (expected a method, or none)"));
  }
  return PrefixCacheLayout{static_cast<int>(block_tokens), static_cast<int>(capacity_blocks)};
}

absl::StatusOr<PrefixCacheStats> CacheStatsFromPython(py::handle result,
                                                      const PrefixCacheLayout& layout) {
  PyObject** items = Items(result, 3);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t blocks = 0;
  PrefixCacheStats stats;
  if (items == nullptr || !IntIn(items[0], 0, layout.capacity_blocks, &blocks) ||
      !IntIn(items[1], 0, kMax, &stats.hit_tokens) ||
      !IntIn(items[2], 0, kMax, &stats.miss_tokens)) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefix_cache_stats returned ", Repr(result),
                     " (expected (blocks, hit_tokens, miss_tokens): ints >= 0, blocks at most "
                     "the capacity, ",
                     layout.capacity_blocks, ")"));
  }
  stats.blocks = static_cast<int>(blocks);
  return stats;
}

absl::StatusOr<std::vector<CacheChange>> CacheChangesFromPython(py::handle result) {
  if (!PyList_Check(result.ptr()) && !PyTuple_Check(result.ptr())) {
    return absl::InvalidArgumentError(absl::StrCat("take_cache_changes returned a ",
                                                   Py_TYPE(result.ptr())->tp_name,
                                                   " (expected a list of (block, stored))"));
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(result.ptr());
  PyObject** items = PySequence_Fast_ITEMS(result.ptr());
  std::vector<CacheChange> changes(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject** change = Items(items[i], 2);
    if (change == nullptr || !BlockFromPython(change[0], &changes[i].block) ||
        !PyBool_Check(change[1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("take_cache_changes returned ", Repr(items[i]), " as change ", i,
                       " (expected (block, stored): an int in [0, 2**64) and a bool)"));
    }
    changes[i].stored = change[1] == Py_True;
  }
  return changes;
}

}  // namespace omnistage
