// pybind11 module of the ms_bridge test package (see bridge_function.cc).
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "opgen/ms_bind.h"

namespace bridge {
opgen::ms::TensorPtr run_mul_add1(const opgen::ms::TensorPtr &x, const opgen::ms::TensorPtr &y);
std::tuple<bool, bool, uint64_t, std::string> empty_info(const opgen::ms::TensorPtr &like,
                                                         const std::vector<int64_t> &shape);
}  // namespace bridge

PYBIND11_MODULE(MS_EXTENSION_NAME, m) {
  m.doc() = "opgen test package: the Function<T> bridge (opgen/ms.h) on real MindSpore tensors.";
  m.def("mul_add1", &bridge::run_mul_add1, "x * y + 1 for float16, bfloat16 and float32 tensors.");
  m.def("empty_info", &bridge::empty_info, "(has device address, from pool, address, dtype) of opgen::ms::empty.");
}
