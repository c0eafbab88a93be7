// A shared library that runs one opgen::parallel_for: loaded, called and dlclose()d by
// parallel_test (mode "dlclose") to check that its pool pins it in memory.
#include <atomic>
#include <cstdint>

#include "opgen/kernel.h"

/// Sum of 0..n-1 computed with opgen::parallel_for.
extern "C" int64_t opgen_test_parallel_sum(int64_t n) {
  std::atomic<int64_t> total{0};
  opgen::parallel_for(n, [&](int64_t b, int64_t e) {
    int64_t s = 0;
    for (int64_t i = b; i < e; ++i) s += i;
    total += s;
  });
  return total.load();
}
