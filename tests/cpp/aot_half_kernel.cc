// An aot kernel written by hand against opgen's headers: out = x * y + 1 for float16, bfloat16
// and float32 rows, dispatched with opgen::aot::dtype_name_v. Loaded by ops.Custom in
// tests/test_kernel_headers.py to check the 16-bit types against real MindSpore tensors.
#include <cstdint>

#include "opgen/aot.h"
#include "opgen/kernel.h"

namespace {
template <typename E>
int run(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  const char *const row[] = {opgen::aot::dtype_name_v<E>, opgen::aot::dtype_name_v<E>, opgen::aot::dtype_name_v<E>};
  if (!opgen::aot::dtypes_match(nparam, dtypes, row)) return -1;  // not this row
  using C = opgen::compute_t<E>;
  opgen::map(opgen::aot::view<E>(params, ndims, shapes, 2), [](C x, C y) noexcept -> C { return x * y + C(1); },
             opgen::aot::view<const E>(params, ndims, shapes, 0), opgen::aot::view<const E>(params, ndims, shapes, 1));
  return opgen::aot::kOk;
}
}  // namespace

/// params = x, y | out
extern "C" int opgen_test_mul_add1(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
                                   void *stream, void *extra) {
  (void)stream;
  (void)extra;
  if (nparam != 3) return opgen::aot::kBadParamCount;
  try {
    int rc = run<opgen::half>(nparam, params, ndims, shapes, dtypes);
    if (rc < 0) rc = run<opgen::bfloat16>(nparam, params, ndims, shapes, dtypes);
    if (rc < 0) rc = run<float>(nparam, params, ndims, shapes, dtypes);
    return rc < 0 ? opgen::aot::kUnsupportedDtype : rc;
  } catch (...) {
    return opgen::aot::kKernelError;
  }
}
