// Test driver for opgen::parallel_for and its thread pool (opgen/parallel.h through
// opgen/kernel.h), run by tests/test_kernel_headers.py. It checks itself and prints one
// "ok <check>" line per check (or "FAIL <check>", exiting 1).
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "opgen/kernel.h"

namespace {

int failures = 0;
void check(bool ok, const std::string &what) {
  if (ok) {
    std::cout << "ok " << what << "\n";
  } else {
    std::cout << "FAIL " << what << "\n";
    ++failures;
  }
}

// Every index of [0, n) visited exactly once, in ranges of at least kParallelGrain (but the last).
bool covers_once(int64_t n) {
  std::vector<int> hits(static_cast<size_t>(n), 0);
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  opgen::parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
    std::lock_guard<std::mutex> lock(mu);
    ranges.emplace_back(b, e);
  });
  for (int h : hits) {
    if (h != 1) return false;
  }
  if (n > 0 && n < 2 * opgen::kParallelGrain && ranges.size() != 1) return false;
  for (const auto &r : ranges) {
    if (r.second - r.first < opgen::kParallelGrain && r.second != n) return false;
  }
  return true;
}

void parallel_checks() {
  const int64_t g = opgen::kParallelGrain;
  std::cout << "threads " << opgen::num_threads() << "\n";
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{16}, int64_t{17}, g - 1, g, 2 * g - 1, 2 * g, 2 * g + 1,
                    10 * g + 7, int64_t{1} << 22}) {
    check(covers_once(n), "covers n=" + std::to_string(n));
  }

  // Several threads work when chunks are slow enough for the worker to wake (>= 2 cores).
  {
    std::mutex mu;
    std::set<std::thread::id> ids;
    opgen::parallel_for(8 * g, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    });
    const size_t expect = opgen::num_threads() >= 2 ? 2 : 1;
    check(ids.size() >= expect && ids.size() <= static_cast<size_t>(opgen::num_threads()),
          "threads used " + std::to_string(ids.size()));
  }

  // Under a ThreadCap of 1 (PyTorch's torch.set_num_threads(1), opgen/torch.h) every loop runs on
  // the calling thread, and num_threads() says 1; the cap ends with its scope.
  {
    std::set<std::thread::id> ids;
    {
      const opgen::ThreadCap cap(1);
      opgen::parallel_for(8 * g, [&](int64_t, int64_t) { ids.insert(std::this_thread::get_id()); });
      check(ids.size() == 1 && *ids.begin() == std::this_thread::get_id() && opgen::num_threads() == 1,
            "thread cap 1 runs serially");
    }
    check(covers_once(10 * g + 7), "covers after a thread cap");
  }

  // An exception in a chunk reaches the caller; the pool keeps working afterwards.
  {
    std::string message;
    try {
      opgen::parallel_for(16 * g, [&](int64_t b, int64_t e) {
        if (b <= 5 * g && 5 * g < e) throw opgen::Error("bad chunk");
      });
    } catch (const opgen::Error &err) {
      message = err.what();
    }
    check(message == "bad chunk", "exception propagates");
    check(covers_once(16 * g), "pool usable after an exception");
  }

  // A loop inside a loop body runs serially (one inner range per outer chunk) and completes.
  {
    std::atomic<int64_t> total{0};
    std::atomic<int> outer{0}, inner{0};
    opgen::parallel_for(4 * g, [&](int64_t, int64_t) {
      ++outer;
      opgen::parallel_for(4 * g, [&](int64_t b2, int64_t e2) {
        ++inner;
        total += e2 - b2;
      });
    });
    check(outer.load() >= 1 && inner.load() == outer.load() && total.load() == outer.load() * 4 * g, "nested loops");
  }

  // Several threads calling parallel_for at once all get correct results.
  {
    std::vector<std::thread> callers;
    std::atomic<int> ok{0};
    for (int t = 0; t < 4; ++t) {
      callers.emplace_back([&] {
        bool good = true;
        for (int rep = 0; rep < 5; ++rep) good = good && covers_once(6 * g + rep);
        if (good) ++ok;
      });
    }
    for (auto &c : callers) c.join();
    check(ok.load() == 4, "concurrent callers");
  }

  // A forked child builds its own pool and still computes correctly.
  {
    std::cout.flush();
    pid_t pid = fork();
    if (pid == 0) {
      int code = covers_once(12 * g) ? 0 : 3;
      std::_Exit(code);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "after fork");
  }

  // map over float: element-wise product, flat (vectorised blocks + tail) and parallel
  {
    const int64_t n = 3 * g + 13;
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n)), o(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      a[static_cast<size_t>(i)] = static_cast<float>(i % 1000) * 0.5f;
      b[static_cast<size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
    }
    const int64_t s[] = {n};
    opgen::map(opgen::make_view<float>(o.data(), s, 1), [](float x, float y) { return x * y; },
               opgen::make_view<const float>(a.data(), s, 1), opgen::make_view<const float>(b.data(), s, 1));
    bool good = true;
    for (int64_t i = 0; i < n; ++i) good = good && o[static_cast<size_t>(i)] == a[static_cast<size_t>(i)] * b[static_cast<size_t>(i)];
    check(good, "map float flat");
  }
}

// A shared library that ran a parallel loop stays loaded after dlclose (its pool threads sleep
// in its code).
int dlclose_check(const char *lib) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    std::cout << "FAIL dlopen " << dlerror() << "\n";
    return 1;
  }
  auto fn = reinterpret_cast<int64_t (*)(int64_t)>(dlsym(h, "opgen_test_parallel_sum"));
  const int64_t n = 40 * opgen::kParallelGrain;
  check(fn != nullptr && fn(n) == n * (n - 1) / 2, "parallel sum in a loaded library");
  dlclose(h);
  void *again = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  check(again != nullptr, "library pinned after dlclose");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // workers still asleep, no crash
  return failures == 0 ? 0 : 1;
}
}  // namespace

int main(int argc, char **argv) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  if (mode == "parallel") {
    parallel_checks();
    return failures == 0 ? 0 : 1;
  }
  if (mode == "dlclose" && argc >= 3) return dlclose_check(argv[2]);
  std::cerr << "usage: parallel_test parallel | dlclose LIB\n";
  return 2;
}
