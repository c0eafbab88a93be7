// Hand-written baseline for bench/bench_ops.py: an aot Custom mul in the style of the CPU
// example of MindSpore's Custom-op tutorial (shared/seeds/custom_operator_custom_r1.6_zh.md,
// CustomAdd), for float32 x, y and out of one shape. The seed sizes the loop with
// `for (i < nparam) size *= shapes[2][i]`, a bug (it should run over ndims[2]); fixed here.
// Built with the flags opgen uses for its aot library (-O3 -std=c++17 -fPIC).
#include <cstdint>
#include <cstring>

extern "C" int CustomMul(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream,
                         void *extra) {
  if (nparam != 3) return 1;
  float *input1 = static_cast<float *>(params[0]);
  float *input2 = static_cast<float *>(params[1]);
  float *output = static_cast<float *>(params[2]);
  size_t size = 1;
  for (int i = 0; i < ndims[2]; i++) {
    size *= shapes[2][i];
  }
  for (int i = 0; i < nparam; i++) {
    if (strcmp(dtypes[i], "float32") != 0) {
      return 2;
    }
  }
  for (size_t i = 0; i < size; i++) {
    output[i] = input1[i] * input2[i];
  }
  return 0;
}
