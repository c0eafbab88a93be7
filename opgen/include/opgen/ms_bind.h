// opgen's pybind11 side of the Function<T> extension (bindings.cc only): the type caster that
// turns a mindspore.Tensor argument into a TensorPtr ("include/utils/tensor_py.h") and the STL
// casters (lists, std::optional). Cheaper than "ms_extension.h", which includes them too.
//
// Shipped with opgen (not generated).
#ifndef OPGEN_MS_BIND_H_
#define OPGEN_MS_BIND_H_

#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "include/utils/tensor_py.h"
#include "opgen/ms.h"

#endif  // OPGEN_MS_BIND_H_
