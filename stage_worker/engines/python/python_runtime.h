// The embedded CPython interpreter a stage worker runs Python engines in.
//
// The interpreter starts once per process, on first use, without its signal
// handlers (the worker's main thread takes SIGTERM/SIGINT with sigwait), and is
// never finalized: a wedged engine thread may hold it to the end, and the
// process exit frees it anyway. Between calls no thread holds the GIL, so an
// idle loop costs nothing and Python threads of the engine run freely.
//
//   if (absl::Status s = StartPython(); !s.ok()) return s;
//   {
//     PythonLock gil;                      // any thread
//     pybind11::module_ m = pybind11::module_::import("json");
//   }
//
// Thread-safe.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_RUNTIME_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_RUNTIME_H_

#include <Python.h>

#include <string>

#include "absl/status/status.h"
#include "pybind11/pybind11.h"

namespace omnistage {

// Starts the interpreter if it is not running, then releases the GIL.
// FAILED_PRECONDITION with CPython's reason when it cannot start (e.g. its
// standard library is missing); later calls return the same.
absl::Status StartPython();

// Holds the GIL for a scope. The calling thread keeps its Python thread state
// between scopes (created on its first lock), so taking the lock costs a mutex
// hand-off, not a thread-state allocation per call. Needs StartPython().
class PythonLock {
 public:
  PythonLock();
  ~PythonLock();
  PythonLock(const PythonLock&) = delete;
  PythonLock& operator=(const PythonLock&) = delete;

 private:
  PyGILState_STATE state_;
};

// "ValueError: bad input" for the exception `error` holds. Needs the GIL.
std::string ExceptionLine(const pybind11::error_already_set& error);
// The exception line and its traceback, as Python prints them. Needs the GIL.
std::string ExceptionWithTraceback(const pybind11::error_already_set& error);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_RUNTIME_H_
