#include "stage_worker/engines/python/python_engine.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/field_error.h"
#include "stage_worker/engines/python/python_class.h"
#include "stage_worker/engines/python/python_convert.h"
#include "stage_worker/engines/python/python_prefix_cache.h"
#include "stage_worker/engines/python/python_runtime.h"

namespace py = pybind11;

namespace omnistage {
namespace {

constexpr const char* kRequiredMethods[] = {"validate", "add",  "append_input", "abort",
                                            "has_work", "step", "utility"};

// The instance's bound methods, looked up once.
struct Methods {
  py::object validate, add, append_input, abort, has_work, step, utility;
  py::object load;  // None when the class has none
  // set_playback_deadline, or None when the class has none.
  py::object playback_deadline;
  // With a prefix cache (python_prefix_cache.h): prefix_cache_stats, and
  // take_cache_changes or None; else None.
  py::object cache_stats, cache_changes;
};

// A request converted for validate, kept for the add that follows it.
struct Prepared {
  std::string id;
  py::object inputs;
  py::object params;
};

class PythonEngine : public Engine {
 public:
  PythonEngine(std::string label, py::object instance, Methods methods, int capacity,
               ResumeMode resume, StreamedInput streamed, PrefixCacheLayout cache)
      : label_(std::move(label)),
        instance_(std::move(instance)),
        methods_(std::move(methods)),
        capacity_(capacity),
        resume_(resume),
        streamed_(streamed),
        cache_(cache) {}

  ~PythonEngine() override {
    PythonLock gil;
    prepared_.reset();
    methods_ = Methods();
    instance_ = py::object();
  }

  // On gRPC threads: only what needs no interpreter.
  absl::Status Validate(const EngineRequest& request) const override {
    if (request.id.empty()) return absl::InvalidArgumentError(label_ + ": empty request id");
    if (absl::Status s = CheckKinds(request.input, "input"); !s.ok()) return s;
    return CheckKinds(request.produced, "produced");
  }

  absl::Status ValidateInLoop(const EngineRequest& request) override {
    PythonLock gil;
    try {
      prepared_ =
          Prepared{request.id, PayloadsToPython(request.input), RequestParamsToPython(request)};
      methods_.validate(request.id, prepared_->inputs, request.input_complete, prepared_->params);
      return absl::OkStatus();
    } catch (py::error_already_set& e) {
      prepared_.reset();
      return Refusal(e);
    } catch (const std::exception& e) {
      prepared_.reset();
      return absl::InvalidArgumentError(absl::StrCat(label_, ": validate: ", e.what()));
    }
  }

  bool validates_in_loop() const override { return true; }

  absl::Status Add(EngineRequest request) override {
    PythonLock gil;
    try {
      Prepared args = prepared_.has_value() && prepared_->id == request.id
                          ? *std::move(prepared_)
                          : Prepared{request.id, PayloadsToPython(request.input),
                                     RequestParamsToPython(request)};
      prepared_.reset();
      methods_.add(request.id, args.inputs, request.input_complete, args.params);
    } catch (py::error_already_set& e) {
      return Raised("add", e);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(label_, ": add: ", e.what()));
    }
    live_.insert(std::move(request.id));
    return absl::OkStatus();
  }

  absl::Status AppendInput(const std::string& id, std::vector<v1::Payload> chunks,
                           bool last) override {
    PythonLock gil;
    try {
      methods_.append_input(id, PayloadsToPython(chunks), last);
      return absl::OkStatus();
    } catch (py::error_already_set& e) {
      return Raised("append_input", e);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(label_, ": append_input: ", e.what()));
    }
  }

  // Passed as the seconds left (a float; negative: it ran out), which the
  // class measures against its own clock. Cannot fail: an exception is kept
  // for the next Step(), as Abort's.
  void SetPlaybackDeadline(const std::string& id, absl::Time runs_out) override {
    if (methods_.playback_deadline.is_none() || !live_.contains(id)) return;
    const double seconds_left = absl::ToDoubleSeconds(runs_out - absl::Now());
    PythonLock gil;
    try {
      methods_.playback_deadline(py::str(id), seconds_left);
    } catch (py::error_already_set& e) {
      Break(Raised("set_playback_deadline", e));
    } catch (const std::exception& e) {
      Break(absl::InternalError(absl::StrCat(label_, ": set_playback_deadline: ", e.what())));
    }
  }

  // Engine::Abort() cannot fail: an exception is kept for the next Step().
  void Abort(const std::vector<std::string>& ids) override {
    for (const std::string& id : ids) live_.erase(id);
    PythonLock gil;
    try {
      py::list list(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) list[i] = py::str(ids[i]);
      methods_.abort(list);
    } catch (py::error_already_set& e) {
      Break(Raised("abort", e));
    } catch (const std::exception& e) {
      Break(absl::InternalError(absl::StrCat(label_, ": abort: ", e.what())));
    }
  }

  bool HasWork() const override {
    if (!broken_.ok()) return true;  // so that Step() reports it
    PythonLock gil;
    try {
      return methods_.has_work().cast<bool>();
    } catch (py::error_already_set& e) {
      Break(Raised("has_work", e));
    } catch (const std::exception& e) {
      Break(absl::InternalError(absl::StrCat(label_, ": has_work: ", e.what())));
    }
    return true;
  }

  absl::StatusOr<std::vector<v1::RequestOutput>> Step() override {
    if (!broken_.ok()) return broken_;
    absl::StatusOr<std::vector<v1::RequestOutput>> outputs;
    {
      PythonLock gil;
      try {
        outputs = OutputsFromPython(methods_.step());
      } catch (py::error_already_set& e) {
        return Raised("step", e);
      } catch (const std::exception& e) {
        return absl::InternalError(absl::StrCat(label_, ": step: ", e.what()));
      }
    }
    if (!outputs.ok()) {
      return absl::InternalError(absl::StrCat(label_, ": step ", outputs.status().message()));
    }
    for (const v1::RequestOutput& output : *outputs) {
      if (output.finished()) live_.erase(output.request_id());
    }
    return outputs;
  }

  absl::StatusOr<google::protobuf::Value> Utility(
      const std::string& name, const google::protobuf::ListValue& args) override {
    PythonLock gil;
    try {
      py::object result = methods_.utility(name, ListToPython(args));
      absl::StatusOr<google::protobuf::Value> value = ValueFromPython(result);
      if (!value.ok()) {
        return absl::InternalError(
            absl::StrCat(label_, ": utility '", name, "' returned ", value.status().message()));
      }
      return value;
    } catch (py::error_already_set& e) {
      absl::StatusCode code = absl::StatusCode::kInternal;
      if (e.matches(PyExc_ValueError) || e.matches(PyExc_TypeError)) {
        code = absl::StatusCode::kInvalidArgument;
      } else if (e.matches(PyExc_NotImplementedError)) {
        code = absl::StatusCode::kUnimplemented;
      }
      return absl::Status(
          code, code == absl::StatusCode::kInternal
                    ? absl::StrCat(label_, ": utility '", name, "' raised ", ExceptionLine(e))
                    : std::string(py::str(e.value())));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(label_, ": utility '", name, "': ", e.what()));
    }
  }

  int capacity() const override { return capacity_; }
  ResumeMode resume_mode() const override { return resume_; }
  StreamedInput streamed_input() const override { return streamed_; }

  EngineLoad load() const override {
    if (broken_.ok()) {
      PythonLock gil;
      try {
        if (!methods_.load.is_none()) {
          auto [running, waiting] = methods_.load().cast<std::pair<int, int>>();
          return {running, waiting};
        }
      } catch (py::error_already_set& e) {
        Break(Raised("load", e));
      } catch (const std::exception& e) {
        Break(absl::InternalError(absl::StrCat(label_, ": load: ", e.what())));
      }
    }
    // What the worker knows: added, not yet finished or aborted.
    const int live = static_cast<int>(live_.size());
    return {std::min(live, capacity_), std::max(0, live - capacity_)};
  }

  PrefixCacheLayout prefix_cache() const override { return cache_; }

  // As with load(), an error here is fatal at the next step.
  PrefixCacheStats prefix_cache_stats() const override {
    if (methods_.cache_stats.is_none() || !broken_.ok()) return {};
    PythonLock gil;
    absl::StatusOr<PrefixCacheStats> stats = Call("prefix_cache_stats", [this] {
      return CacheStatsFromPython(methods_.cache_stats(), cache_);
    });
    if (!stats.ok()) Break(stats.status());
    return stats.value_or(PrefixCacheStats());
  }

  std::vector<CacheChange> TakeCacheChanges() override {
    if (methods_.cache_changes.is_none() || !broken_.ok()) return {};
    PythonLock gil;
    absl::StatusOr<std::vector<CacheChange>> changes = Call(
        "take_cache_changes", [this] { return CacheChangesFromPython(methods_.cache_changes()); });
    if (!changes.ok()) Break(changes.status());
    return changes.value_or(std::vector<CacheChange>());
  }

 private:
  // INVALID_ARGUMENT at "<field>[i]" for the first payload with no kind: no
  // Python value stands for it.
  absl::Status CheckKinds(const std::vector<v1::Payload>& payloads, const char* field) const {
    for (size_t i = 0; i < payloads.size(); ++i) {
      if (payloads[i].kind_case() == v1::Payload::KIND_NOT_SET) {
        return AtField(absl::InvalidArgumentError(absl::StrCat(label_, ": ", field, " payload ", i,
                                                               " is empty (no kind set)")),
                       absl::StrCat(field, "[", i, "]"));
      }
    }
    return absl::OkStatus();
  }

  // A fatal error: the exception, its traceback, and where it came from.
  absl::Status Raised(const char* method, const py::error_already_set& e) const {
    return absl::InternalError(absl::StrCat(label_, ": ", method, " raised ", ExceptionLine(e),
                                            "\n", ExceptionWithTraceback(e)));
  }

  // What `call` returns (it calls the engine's `method`; the caller holds the
  // GIL): an exception, or a malformed result, as a fatal error naming it.
  template <typename F>
  decltype(std::declval<F>()()) Call(const char* method, F call) const {
    try {
      auto result = call();
      if (!result.ok()) {
        return absl::InternalError(absl::StrCat(label_, ": ", result.status().message()));
      }
      return result;
    } catch (py::error_already_set& e) {
      return Raised(method, e);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(label_, ": ", method, ": ", e.what()));
    }
  }

  // validate's exception: the request's refusal, with the field it names.
  absl::Status Refusal(const py::error_already_set& e) const {
    std::string message =
        e.matches(PyExc_ValueError) ? std::string(py::str(e.value())) : ExceptionLine(e);
    absl::Status status = absl::InvalidArgumentError(message);
    if (py::hasattr(e.value(), "field")) {
      py::object field = e.value().attr("field");
      if (PyUnicode_Check(field.ptr())) status = AtField(status, std::string(py::str(field)));
    }
    return status;
  }

  // The first error of a call that cannot return one (abort, has_work, load).
  void Break(absl::Status status) const {
    if (broken_.ok()) broken_ = std::move(status);
  }

  const std::string label_;  // "python engine <module>.<class>"
  py::object instance_;
  Methods methods_;
  const int capacity_;
  const ResumeMode resume_;
  const StreamedInput streamed_;
  const PrefixCacheLayout cache_;
  std::optional<Prepared> prepared_;
  absl::flat_hash_set<std::string> live_;
  mutable absl::Status broken_;
};

absl::Status Refused(std::string message, const std::string& field) {
  absl::Status status = absl::InvalidArgumentError(absl::StrCat("engine python: ", message));
  return field.empty() ? status : AtField(status, field);
}

void PrependToSysPath(const std::string& path) {
  py::list sys_path = py::module_::import("sys").attr("path");
  py::object abspath = py::module_::import("os.path").attr("abspath");
  std::vector<std::string> dirs = absl::StrSplit(path, ':', absl::SkipEmpty());
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) sys_path.insert(0, abspath(*it));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreatePythonEngine(
    const std::map<std::string, std::string>& params) {
  std::map<std::string, std::string> own = params;
  const std::string module_name = own["module"];
  const std::string class_name = own["class"];
  const std::string path = own["path"];
  own.erase("module");
  own.erase("class");
  own.erase("path");
  if (module_name.empty()) {
    return Refused("parameter 'module' is required (the Python module to import)", "module");
  }
  if (class_name.empty()) {
    return Refused(
        "parameter 'class' is required (the engine class in module '" + module_name + "')",
        "class");
  }
  const std::string qualified = absl::StrCat(module_name, ".", class_name);
  if (absl::Status started = StartPython(); !started.ok()) {
    return Refused(std::string(started.message()), "");
  }
  PythonLock gil;
  try {
    if (!path.empty()) PrependToSysPath(path);
    py::module_ module;
    try {
      module = py::module_::import(module_name.c_str());
    } catch (py::error_already_set& e) {
      return Refused(absl::StrCat("cannot import module '", module_name, "': ", ExceptionLine(e)),
                     "module");
    }
    if (!py::hasattr(module, class_name.c_str())) {
      return Refused(absl::StrCat("module '", module_name, "' has no class '", class_name, "'"),
                     "class");
    }
    py::object cls = module.attr(class_name.c_str());
    for (const char* method : kRequiredMethods) {
      if (!py::hasattr(cls, method) || !PyCallable_Check(cls.attr(method).ptr())) {
        return Refused(absl::StrCat("class ", qualified, " has no method '", method,
                                    "' (an engine implements validate, add, append_input, abort, "
                                    "has_work, step, utility and capacity)"),
                       "class");
      }
    }
    absl::StatusOr<ResumeMode> resume = ReadResume(cls, qualified);
    if (!resume.ok()) return Refused(std::string(resume.status().message()), "class");
    absl::StatusOr<StreamedInput> streamed = ReadStreamedInput(cls, qualified);
    if (!streamed.ok()) return Refused(std::string(streamed.status().message()), "class");
    py::dict engine_params;
    for (const auto& [key, value] : own) engine_params[py::str(key)] = py::str(value);
    py::object instance;
    try {
      instance = cls(engine_params);
    } catch (py::error_already_set& e) {
      std::string field;
      if (py::hasattr(e.value(), "param")) field = py::str(e.value().attr("param"));
      return Refused(absl::StrCat(qualified, "(params) raised ", ExceptionLine(e)), field);
    }
    absl::StatusOr<int> capacity = ReadCapacity(instance, qualified);
    if (!capacity.ok()) return Refused(std::string(capacity.status().message()), "class");
    absl::StatusOr<PrefixCacheLayout> cache = ReadPrefixCache(instance, qualified);
    if (!cache.ok()) return Refused(std::string(cache.status().message()), "class");
    const bool cached = cache->block_tokens > 0;
    Methods methods{instance.attr("validate"),
                    instance.attr("add"),
                    instance.attr("append_input"),
                    instance.attr("abort"),
                    instance.attr("has_work"),
                    instance.attr("step"),
                    instance.attr("utility"),
                    py::getattr(instance, "load", py::none()),
                    py::getattr(instance, "set_playback_deadline", py::none()),
                    cached ? instance.attr("prefix_cache_stats") : py::object(py::none()),
                    cached ? py::getattr(instance, "take_cache_changes", py::none()) : py::none()};
    return std::make_unique<PythonEngine>(absl::StrCat("python engine ", qualified),
                                          std::move(instance), std::move(methods), *capacity,
                                          *resume, *streamed, *cache);
  } catch (py::error_already_set& e) {
    return Refused(absl::StrCat(qualified, ": ", ExceptionLine(e)), "");
  }
}

}  // namespace omnistage
