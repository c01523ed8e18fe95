#include "stage_worker/engines/python/python_runtime.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "pybind11/embed.h"

namespace py = pybind11;

namespace omnistage {
namespace {

// Gives the calling thread a Python thread state that outlives each PythonLock:
// PyGILState_Ensure() creates one when the thread has none and
// PyGILState_Release() deletes it when its count drops to zero, so one count is
// kept for the thread's lifetime.
void PinThreadState() {
  thread_local bool pinned = false;
  if (pinned) return;
  PyGILState_Ensure();
  PyEval_SaveThread();
  pinned = true;
}

}  // namespace

absl::Status StartPython() {
  static std::once_flag started;
  static absl::Status* outcome = nullptr;  // Never destroyed: read until exit.
  std::call_once(started, [] {
    outcome = new absl::Status();
    if (Py_IsInitialized()) return;
    static const char* const argv[] = {"stage_worker"};
    try {
      py::initialize_interpreter(/*init_signal_handlers=*/false, 1, argv,
                                 /*add_program_dir_to_path=*/false);
    } catch (const std::exception& e) {
      *outcome = absl::FailedPreconditionError(
          absl::StrCat("the Python interpreter did not start (is Python 3.11's standard "
                       "library installed? Debian: libpython3.11-stdlib): ",
                       e.what()));
      return;
    }
    PyEval_SaveThread();  // This thread's state stays; the GIL is free.
  });
  return *outcome;
}

PythonLock::PythonLock() {
  PinThreadState();
  state_ = PyGILState_Ensure();
}

PythonLock::~PythonLock() { PyGILState_Release(state_); }

std::string ExceptionLine(const py::error_already_set& error) {
  std::string type = "exception";
  if (error.type()) type = py::str(error.type().attr("__name__"));
  std::string message = error.value() ? std::string(py::str(error.value())) : "";
  return message.empty() ? type : absl::StrCat(type, ": ", message);
}

std::string ExceptionWithTraceback(const py::error_already_set& error) {
  try {
    py::list lines = py::module_::import("traceback")
                         .attr("format_exception")(error.type(), error.value(), error.trace());
    std::string text;
    for (py::handle line : lines) text += py::str(line);
    return std::string(absl::StripSuffix(text, "\n"));
  } catch (const std::exception&) {
    return ExceptionLine(error);  // traceback itself failed: the line still says what.
  }
}

}  // namespace omnistage
