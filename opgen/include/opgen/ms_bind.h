// opgen's pybind11 side of the Function<T> extension (bindings.cc only): the type caster that
// turns a mindspore.Tensor argument into a TensorPtr ("include/utils/tensor_py.h") and the STL
// casters (lists, std::optional). Cheaper than "ms_extension.h", which includes them too.
//
// Shipped with opgen (not generated).
#ifndef OPGEN_MS_BIND_H_
#define OPGEN_MS_BIND_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "include/utils/tensor_py.h"
#include "opgen/ms.h"

namespace opgen {
namespace bind {
namespace detail {
/// numbers.Integral / numbers.Real, looked up once (kept for the life of the process).
inline PyObject *abc(const char *which) {
  static PyObject *integral = pybind11::object(pybind11::module_::import("numbers").attr("Integral")).release().ptr();
  static PyObject *real = pybind11::object(pybind11::module_::import("numbers").attr("Real")).release().ptr();
  return which[0] == 'I' ? integral : real;
}
inline bool is_bool(PyObject *v) {
  return PyBool_Check(v) || std::string(Py_TYPE(v)->tp_name) == "numpy.bool_" ||
         std::string(Py_TYPE(v)->tp_name) == "numpy.bool";
}
[[noreturn]] inline void bad(const char *op, const char *name, const char *type, const pybind11::handle &v, bool item) {
  const std::string got = pybind11::str(pybind11::type::handle_of(v).attr("__name__")).cast<std::string>();
  throw pybind11::type_error(std::string(op) + "(): attr '" + name + "' must be a " + type + ", got " + got +
                             (item ? " " + pybind11::repr(v).cast<std::string>() : std::string()));
}

/// The elements of a list attr: `value` must be a list or tuple and `ok(item)` hold for each
/// item, else TypeError with check_attrs's message for `type` ("list[int]"...); `get(item)` is
/// the C++ value.
template <typename T, typename Ok, typename Get>
std::vector<T> items(const char *op, const char *name, const char *type, const pybind11::handle &value, Ok ok,
                     Get get) {
  if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) bad(op, name, type, value, false);
  const pybind11::sequence seq = pybind11::reinterpret_borrow<pybind11::sequence>(value);
  std::vector<T> out;
  out.reserve(seq.size());
  for (const auto &v : seq) {
    if (!ok(v.ptr())) bad(op, name, type, v, true);
    out.push_back(get(v));
  }
  return out;
}
}  // namespace detail

/// A list[int] attr of the Function<T> path: a list or tuple of integers (numpy integers too),
/// never a bool, each within int64, as opgen.runtime.check_attrs requires, with its messages.
/// The generated wrapper checks a list attr with a range or choices once per distinct value and
/// then compares values, which cannot tell True from 1; one without is left to this alone. So
/// the element types are checked here, on every call (an exact int takes the fast path). Raises
/// TypeError (pybind11::type_error), ValueError for an element outside int64.
inline std::vector<int64_t> int_list(const char *op, const char *name, const pybind11::handle &value) {
  return detail::items<int64_t>(
      op, name, "list[int]", value,
      [](PyObject *v) {
        return PyLong_CheckExact(v) || (!detail::is_bool(v) && PyObject_IsInstance(v, detail::abc("Integral")) == 1);
      },
      [&](const pybind11::handle &v) {
        int overflow = 0;
        const long long r = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
        if (overflow != 0) {
          throw pybind11::value_error(std::string(op) + "(): attr '" + name + "' = " +
                                      pybind11::repr(v).cast<std::string>() +
                                      " does not fit an int attr (int64: -2**63 to 2**63-1)");
        }
        if (r == -1 && PyErr_Occurred() != nullptr) throw pybind11::error_already_set();
        return static_cast<int64_t>(r);
      });
}

/// A list[float] attr of the Function<T> path: a list or tuple of real numbers (ints and numpy
/// floats too), never a bool, each within float32's range or infinite (ValueError); see int_list.
/// Raises TypeError (pybind11::type_error).
inline std::vector<float> float_list(const char *op, const char *name, const pybind11::handle &value) {
  return detail::items<float>(
      op, name, "list[float]", value,
      [](PyObject *v) {
        return PyFloat_CheckExact(v) || PyLong_CheckExact(v) ||
               (!detail::is_bool(v) && PyObject_IsInstance(v, detail::abc("Real")) == 1);
      },
      [&](const pybind11::handle &v) {
        const double d = PyFloat_AsDouble(v.ptr());
        if (d == -1.0 && PyErr_Occurred() != nullptr) throw pybind11::error_already_set();
        if (std::isfinite(d) && std::fabs(d) > static_cast<double>(std::numeric_limits<float>::max())) {
          throw pybind11::value_error(std::string(op) + "(): attr '" + name + "' = " +
                                      pybind11::repr(v).cast<std::string>() +
                                      " does not fit a float attr (float32: at most 3.4028235e+38 in magnitude, or inf)");
        }
        return static_cast<float>(d);
      });
}

/// A list[bool] attr of the Function<T> path: a list or tuple of bools (numpy bools too), never
/// 0 or 1; see int_list. Raises TypeError (pybind11::type_error).
inline std::vector<bool> bool_list(const char *op, const char *name, const pybind11::handle &value) {
  return detail::items<bool>(op, name, "list[bool]", value, [](PyObject *v) { return detail::is_bool(v); },
                             [](const pybind11::handle &v) { return PyObject_IsTrue(v.ptr()) == 1; });
}

/// A list[str] attr of the Function<T> path: a list or tuple of str (not bytes); see int_list.
/// Raises TypeError (pybind11::type_error).
inline std::vector<std::string> str_list(const char *op, const char *name, const pybind11::handle &value) {
  return detail::items<std::string>(op, name, "list[str]", value, [](PyObject *v) { return PyUnicode_Check(v) != 0; },
                                    [](const pybind11::handle &v) { return v.cast<std::string>(); });
}
/// The rows of a list[list[...]] attr: `value` a list or tuple of lists or tuples, each read by
/// `row(op, name, item)` (int_list or float_list), with check_attrs's messages for `type`.
template <typename R>
std::vector<R> rows(const char *op, const char *name, const char *type, const pybind11::handle &value,
                    R (*row)(const char *, const char *, const pybind11::handle &)) {
  if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) detail::bad(op, name, type, value, false);
  const pybind11::sequence seq = pybind11::reinterpret_borrow<pybind11::sequence>(value);
  std::vector<R> out;
  out.reserve(seq.size());
  for (const auto &r : seq) {
    if (!PyList_Check(r.ptr()) && !PyTuple_Check(r.ptr())) {
      const std::string got = pybind11::str(pybind11::type::handle_of(r).attr("__name__")).cast<std::string>();
      throw pybind11::type_error(std::string(op) + "(): attr '" + name + "' must be a " + type + ", got a row " +
                                 got + " " + pybind11::repr(r).cast<std::string>());
    }
    try {
      out.push_back(row(op, name, r));
    } catch (const pybind11::type_error &e) {  // name the nested type, as check_attrs does
      std::string msg = e.what();
      const std::string flat = type + 5;  // "list[int]]" -> the row's own type name below
      const std::string row_type = flat.substr(0, flat.size() - 1);
      const size_t at = msg.find("must be a " + row_type);
      if (at != std::string::npos) msg.replace(at + 10, row_type.size(), type);
      throw pybind11::type_error(msg);
    }
  }
  return out;
}

/// A list[list[int]] attr of the Function<T> path: a list or tuple of rows, each as int_list
/// takes it (rows may differ in length). Raises TypeError, ValueError (an item outside int64).
inline std::vector<std::vector<int64_t>> int_rows(const char *op, const char *name, const pybind11::handle &value) {
  return rows<std::vector<int64_t>>(op, name, "list[list[int]]", value, &int_list);
}

/// A list[list[float]] attr of the Function<T> path: rows as float_list takes them.
inline std::vector<std::vector<float>> float_rows(const char *op, const char *name, const pybind11::handle &value) {
  return rows<std::vector<float>>(op, name, "list[list[float]]", value, &float_list);
}
}  // namespace bind
}  // namespace opgen

#endif  // OPGEN_MS_BIND_H_
