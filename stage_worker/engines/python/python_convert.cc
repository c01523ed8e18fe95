#include "stage_worker/engines/python/python_convert.h"

#include <cmath>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"

namespace py = pybind11;

namespace omnistage {
namespace {

constexpr int kMaxDepth = 64;  // of nested lists and dicts in a utility result

std::string TypeName(PyObject* value) { return Py_TYPE(value)->tp_name; }
std::string TypeName(py::handle value) { return TypeName(value.ptr()); }

py::object PayloadToPython(const v1::Payload& payload) {
  switch (payload.kind_case()) {
    case v1::Payload::kText:
      return py::str(payload.text().text());
    case v1::Payload::kTokens: {
      const auto& ids = payload.tokens().ids();
      py::list list(ids.size());
      for (int i = 0; i < ids.size(); ++i) {
        PyList_SET_ITEM(list.ptr(), i, PyLong_FromLong(ids[i]));
      }
      return std::move(list);
    }
    case v1::Payload::kRaw:
      return py::bytes(payload.raw());
    case v1::Payload::kAudio: {
      py::dict audio;
      audio["pcm_s16le"] = py::bytes(payload.audio().pcm_s16le());
      audio["sample_rate_hz"] = payload.audio().sample_rate_hz();
      audio["channels"] = payload.audio().channels();
      return std::move(audio);
    }
    case v1::Payload::KIND_NOT_SET:
      break;
  }
  return py::none();
}

absl::Status Malformed(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// The hot path of every step: raw CPython calls on borrowed references, and no
// string built unless something is wrong (`where` is only called then).
using Where = absl::FunctionRef<std::string()>;

absl::Status TokensFromPython(PyObject* list, Where where, v1::Payload* payload) {
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(list);
  PyObject** items = PySequence_Fast_ITEMS(list);
  auto* out = payload->mutable_tokens()->mutable_ids();
  out->Reserve(static_cast<int>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!PyLong_Check(items[i])) {
      return Malformed(where(), absl::StrCat("a token id is a ", TypeName(items[i]),
                                             ", not an int"));
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(items[i], &overflow);
    if (overflow != 0 || v < INT32_MIN || v > INT32_MAX) {
      return Malformed(where(), "a token id does not fit in 32 bits");
    }
    out->AddAlreadyReserved(static_cast<int32_t>(v));
  }
  return absl::OkStatus();
}

absl::Status PayloadFromPython(PyObject* object, Where where, v1::Payload* payload) {
  if (PyUnicode_Check(object)) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(object, &size);
    if (text == nullptr) {
      PyErr_Clear();
      return Malformed(where(), "a str that is not valid UTF-8");
    }
    payload->mutable_text()->set_text(text, static_cast<size_t>(size));
    return absl::OkStatus();
  }
  if (PyList_Check(object) || PyTuple_Check(object)) {
    return TokensFromPython(object, where, payload);
  }
  if (PyBytes_Check(object)) {
    payload->set_raw(PyBytes_AS_STRING(object), static_cast<size_t>(PyBytes_GET_SIZE(object)));
    return absl::OkStatus();
  }
  if (PyDict_Check(object)) {
    py::dict audio = py::reinterpret_borrow<py::dict>(object);
    if (!audio.contains("pcm_s16le") || !PyBytes_Check(audio["pcm_s16le"].ptr())) {
      return Malformed(where(), "an audio dict needs pcm_s16le as bytes");
    }
    v1::AudioChunk* chunk = payload->mutable_audio();
    chunk->set_pcm_s16le(std::string(py::bytes(audio["pcm_s16le"])));
    try {
      chunk->set_sample_rate_hz(audio.contains("sample_rate_hz")
                                    ? audio["sample_rate_hz"].cast<int32_t>()
                                    : 0);
      chunk->set_channels(audio.contains("channels") ? audio["channels"].cast<int32_t>() : 1);
    } catch (const py::cast_error&) {
      return Malformed(where(), "an audio dict's sample_rate_hz and channels must be ints");
    }
    return absl::OkStatus();
  }
  return Malformed(where(), absl::StrCat("a payload is a ", TypeName(object),
                                         " (expected str, list of int, bytes or an audio dict)"));
}

absl::StatusOr<v1::FinishReason> FinishFromPython(PyObject* value, Where where) {
  if (value == Py_None) return v1::FINISH_REASON_UNSPECIFIED;
  if (PyUnicode_Check(value)) {
    if (PyUnicode_CompareWithASCIIString(value, "stop") == 0) return v1::FINISH_REASON_STOP;
    if (PyUnicode_CompareWithASCIIString(value, "length") == 0) return v1::FINISH_REASON_LENGTH;
    if (PyUnicode_CompareWithASCIIString(value, "abort") == 0) return v1::FINISH_REASON_ABORT;
    if (PyUnicode_CompareWithASCIIString(value, "error") == 0) return v1::FINISH_REASON_ERROR;
  }
  return Malformed(where(), absl::StrCat("finish is ", std::string(py::repr(value)),
                                         " (expected None, \"stop\", \"length\", \"abort\" or "
                                         "\"error\")"));
}

absl::Status OutputFromPython(PyObject* item, size_t index, v1::RequestOutput* output) {
  auto numbered = [index] { return absl::StrCat("output ", index); };
  if (!PyTuple_Check(item) && !PyList_Check(item)) {
    return Malformed(numbered(), absl::StrCat("is a ", TypeName(item),
                                              " (expected a tuple (request_id, payloads[, "
                                              "finish[, message]]))"));
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(item);
  PyObject** fields = PySequence_Fast_ITEMS(item);
  if (n < 2 || n > 4) {
    return Malformed(numbered(), absl::StrCat("has ", n, " fields (expected 2 to 4)"));
  }
  Py_ssize_t id_size = 0;
  const char* id = PyUnicode_Check(fields[0]) ? PyUnicode_AsUTF8AndSize(fields[0], &id_size)
                                              : nullptr;
  if (id == nullptr) {
    PyErr_Clear();
    return Malformed(numbered(), "request_id is not a str");
  }
  output->set_request_id(id, static_cast<size_t>(id_size));
  auto named = [output] { return absl::StrCat("output for '", output->request_id(), "'"); };
  PyObject* payloads = fields[1];
  if (!PyList_Check(payloads) && !PyTuple_Check(payloads)) {
    return Malformed(named(), "payloads is not a list");
  }
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(payloads);
  PyObject** items = PySequence_Fast_ITEMS(payloads);
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (absl::Status s = PayloadFromPython(items[i], named, output->add_payloads()); !s.ok()) {
      return s;
    }
  }
  if (n >= 3) {
    absl::StatusOr<v1::FinishReason> reason = FinishFromPython(fields[2], named);
    if (!reason.ok()) return reason.status();
    output->set_finished(*reason != v1::FINISH_REASON_UNSPECIFIED);
    output->set_finish_reason(*reason);
    const bool message = n == 4 && fields[3] != Py_None;
    if (*reason == v1::FINISH_REASON_ERROR || message) {
      v1::Error* error = output->mutable_error();
      error->set_code(static_cast<int>(absl::StatusCode::kInternal));
      if (message) error->set_message(py::str(fields[3]));
    }
  }
  return absl::OkStatus();
}

absl::Status ValueFromPythonAt(py::handle value, int depth, google::protobuf::Value* out) {
  if (depth > kMaxDepth) return absl::InvalidArgumentError("nested deeper than 64 levels");
  PyObject* object = value.ptr();
  if (value.is_none()) {
    out->set_null_value(google::protobuf::NULL_VALUE);
  } else if (PyBool_Check(object)) {
    out->set_bool_value(object == Py_True);
  } else if (PyLong_Check(object) || PyFloat_Check(object)) {
    const double number = PyFloat_AsDouble(object);
    if (number == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return absl::InvalidArgumentError("an int too large for a double");
    }
    out->set_number_value(number);
  } else if (PyUnicode_Check(object)) {
    out->set_string_value(py::str(value));
  } else if (PyList_Check(object) || PyTuple_Check(object)) {
    auto* list = out->mutable_list_value();
    for (py::handle item : py::reinterpret_borrow<py::sequence>(value)) {
      if (absl::Status s = ValueFromPythonAt(item, depth + 1, list->add_values()); !s.ok()) {
        return s;
      }
    }
  } else if (PyDict_Check(object)) {
    auto& fields = *out->mutable_struct_value()->mutable_fields();
    for (auto [key, item] : py::reinterpret_borrow<py::dict>(value)) {
      if (!PyUnicode_Check(key.ptr())) {
        return absl::InvalidArgumentError(
            absl::StrCat("a dict key is a ", TypeName(key), ", not a str"));
      }
      if (absl::Status s = ValueFromPythonAt(item, depth + 1, &fields[py::str(key)]); !s.ok()) {
        return s;
      }
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", TypeName(value),
                     " (expected None, bool, int, float, str, list or dict)"));
  }
  return absl::OkStatus();
}

py::object ValueToPython(const google::protobuf::Value& value) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kBoolValue:
      return py::bool_(value.bool_value());
    case google::protobuf::Value::kNumberValue:
      return py::float_(value.number_value());
    case google::protobuf::Value::kStringValue:
      return py::str(value.string_value());
    case google::protobuf::Value::kListValue:
      return ListToPython(value.list_value());
    case google::protobuf::Value::kStructValue: {
      py::dict dict;
      for (const auto& [key, item] : value.struct_value().fields()) {
        dict[py::str(key)] = ValueToPython(item);
      }
      return std::move(dict);
    }
    case google::protobuf::Value::kNullValue:
    case google::protobuf::Value::KIND_NOT_SET:
      break;
  }
  return py::none();
}

}  // namespace

py::list PayloadsToPython(const std::vector<v1::Payload>& payloads) {
  py::list list(payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    PyList_SET_ITEM(list.ptr(), i, PayloadToPython(payloads[i]).release().ptr());
  }
  return list;
}

py::dict ParamsToPython(const v1::StageParameters& params) {
  py::dict dict;
  dict["max_tokens"] = params.has_max_tokens() ? py::object(py::int_(params.max_tokens()))
                                               : py::object(py::none());
  dict["seed"] =
      params.has_seed() ? py::object(py::int_(params.seed())) : py::object(py::none());
  dict["temperature"] = params.has_temperature()
                            ? py::object(py::float_(params.temperature()))
                            : py::object(py::none());
  py::dict extra;
  for (const auto& [key, value] : params.extra()) extra[py::str(key)] = py::str(value);
  dict["extra"] = extra;
  return dict;
}

py::dict RequestParamsToPython(const EngineRequest& request) {
  py::dict dict = ParamsToPython(request.params);
  dict["produced"] = PayloadsToPython(request.produced);
  return dict;
}

py::list ListToPython(const google::protobuf::ListValue& list) {
  py::list out(list.values_size());
  for (int i = 0; i < list.values_size(); ++i) {
    PyList_SET_ITEM(out.ptr(), i, ValueToPython(list.values(i)).release().ptr());
  }
  return out;
}

absl::StatusOr<google::protobuf::Value> ValueFromPython(py::handle value) {
  google::protobuf::Value out;
  if (absl::Status s = ValueFromPythonAt(value, 0, &out); !s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<v1::RequestOutput>> OutputsFromPython(py::handle outputs) {
  if (!PyList_Check(outputs.ptr()) && !PyTuple_Check(outputs.ptr())) {
    return absl::InvalidArgumentError(
        absl::StrCat("returned a ", TypeName(outputs), ", not a list of outputs"));
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(outputs.ptr());
  PyObject** items = PySequence_Fast_ITEMS(outputs.ptr());
  std::vector<v1::RequestOutput> result(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (absl::Status s = OutputFromPython(items[i], static_cast<size_t>(i), &result[i]);
        !s.ok()) {
      return s;
    }
  }
  return result;
}

}  // namespace omnistage
