#include "stage_worker/engines/python/python_class.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace py = pybind11;

namespace omnistage {
namespace {

constexpr int kMaxCapacity = 65536;

}  // namespace

absl::StatusOr<int> ReadCapacity(const py::object& instance, const std::string& qualified) {
  if (!py::hasattr(instance, "capacity")) {
    return absl::InvalidArgumentError(
        absl::StrCat("class ", qualified, " has no method 'capacity'"));
  }
  py::object capacity = instance.attr("capacity");
  if (PyCallable_Check(capacity.ptr())) capacity = capacity();
  if (!PyLong_Check(capacity.ptr()) || capacity.cast<long long>() < 1 ||
      capacity.cast<long long>() > kMaxCapacity) {
    return absl::InvalidArgumentError(
        absl::StrCat(qualified, ".capacity is ", std::string(py::repr(capacity)),
                     " (expected an int in [1, ", kMaxCapacity, "])"));
  }
  return capacity.cast<int>();
}

absl::StatusOr<ResumeMode> ReadResume(const py::object& cls, const std::string& qualified) {
  py::object resume = py::getattr(cls, "resume", py::none());
  if (resume.is_none()) return ResumeMode::kNone;
  if (PyUnicode_Check(resume.ptr())) {
    const std::string value = py::str(resume);
    if (value == "replay") return ResumeMode::kReplay;
    if (value == "continuation") return ResumeMode::kContinuation;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("class ", qualified, ".resume is ", std::string(py::repr(resume)),
                   " (expected \"replay\" or \"continuation\", or None or no attribute for an "
                   "engine that cannot resume a lost request)"));
}

absl::StatusOr<StreamedInput> ReadStreamedInput(const py::object& cls,
                                                const std::string& qualified) {
  py::object streamed = py::getattr(cls, "streamed_input", py::none());
  if (streamed.is_none()) return StreamedInput::kWhole;
  if (PyUnicode_Check(streamed.ptr())) {
    const std::string value = py::str(streamed);
    if (value == "whole") return StreamedInput::kWhole;
    if (value == "incremental") return StreamedInput::kIncremental;
    if (value == "none") return StreamedInput::kNone;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "class ", qualified, ".streamed_input is ", std::string(py::repr(streamed)),
      " (expected \"whole\", \"incremental\" or \"none\", or no attribute: \"whole\")"));
}

}  // namespace omnistage
