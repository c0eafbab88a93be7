// opgen parallel loops: one persistent thread pool per shared library and parallel_for.
//
// Why a pool: starting and joining a std::thread costs tens of microseconds on a busy 2-core
// machine (measured 25-60 us, see docs/performance.md), more than a whole 1M-element float mul
// takes per core. The pool's workers sleep on a condition variable between loops; waking them
// costs a few microseconds. Loops smaller than 2 * kParallelGrain elements never touch the pool.
//
// Robustness rules, each one tested (tests/test_kernel_headers.py):
//  - work is split into chunks claimed from an atomic counter, and the calling thread works too:
//    a worker that the OS schedules late simply finds no chunk left, and the caller never waits
//    for a worker that has not started (no straggler on a machine shared with other processes);
//  - a loop started from inside a pool task, or while another thread is using the pool, runs on
//    the calling thread alone (no deadlock, no oversubscription);
//  - an exception thrown by the body in any thread is rethrown in the caller (the first one);
//  - after fork() the child builds a fresh pool (threads do not survive fork);
//  - the library holding the pool is pinned in memory (RTLD_NODELETE) so that a dlclose() of
//    an aot kernel library cannot unmap code that sleeping workers will return into.
//
// OPGEN_NUM_THREADS=<n> sets the number of threads (1 disables the pool); by default it is the
// number of CPUs this process may run on (sched_getaffinity of the process).
//
// Shipped with opgen (not generated). Framework-free: used by the aot and Function<T> paths.
#ifndef OPGEN_PARALLEL_H_
#define OPGEN_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sched.h>
#endif

#if defined(__GNUC__) || defined(__clang__)
#define OPGEN_HIDDEN __attribute__((visibility("hidden")))
#else
#define OPGEN_HIDDEN
#endif

namespace opgen {

/// Minimum elements per parallel chunk: a loop over fewer than 2 * kParallelGrain elements runs
/// on the calling thread alone. 32768 float elements of an element-wise op take ~10-15 us on
/// one core here, a few times the cost of waking a pool worker.
constexpr int64_t kParallelGrain = int64_t{1} << 15;

namespace detail {

/// Threads a parallel loop may use: OPGEN_NUM_THREADS if set (>= 1), else the CPUs this process
/// may run on. Computed once per library.
OPGEN_HIDDEN inline int configured_threads() {
  static const int n = [] {
    if (const char *env = std::getenv("OPGEN_NUM_THREADS")) {
      long v = std::strtol(env, nullptr, 10);
      if (v >= 1) return static_cast<int>(std::min<long>(v, 256));
    }
#if defined(__linux__)
    // The process's CPUs (its main thread's mask), not the calling thread's: the first loop may
    // run on a runtime thread that MindSpore pinned to one core.
    cpu_set_t set;
    if (sched_getaffinity(getpid(), sizeof(set), &set) == 0) {
      int c = CPU_COUNT(&set);
      if (c >= 1) return c;
    }
#endif
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
  }();
  return n;
}

/// A cap on the threads of the loops this thread starts (0: none). A framework bridge sets it
/// around a kernel call to the framework's own intra-op thread count (opgen/torch.h: PyTorch's
/// at::get_num_threads()), so that the pool never runs more threads than the caller allows.
OPGEN_HIDDEN inline int &thread_cap() {
  static thread_local int cap = 0;
  return cap;
}

/// Set while a thread runs pool tasks: nested loops then run serially.
OPGEN_HIDDEN inline bool &in_parallel_region() {
  static thread_local bool flag = false;
  return flag;
}

/// One parallel loop handed to the pool: chunks of [0, n) claimed through `next`.
struct Job {
  void (*call)(void *ctx, int64_t begin, int64_t end) = nullptr;
  void *ctx = nullptr;
  int64_t n = 0;
  int64_t chunk = 1;
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;

  /// Claims and runs chunks until none is left (or a chunk threw).
  void work() {
    for (;;) {
      const int64_t b = next.fetch_add(chunk, std::memory_order_relaxed);
      if (b >= n) return;
      const int64_t e = std::min(n, b + chunk);
      try {
        call(ctx, b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!failed.exchange(true)) error = std::current_exception();
        next.store(n, std::memory_order_relaxed);  // stop handing out chunks
        return;
      }
    }
  }
};

OPGEN_HIDDEN inline void pool_anchor() {}

/// Keeps the shared object that holds this code loaded for good (see the header comment).
OPGEN_HIDDEN inline void pin_this_library() {
#if defined(__unix__) || defined(__APPLE__)
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&pool_anchor), &info) != 0 && info.dli_fname != nullptr) {
    (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
#endif
}

/// Persistent workers that sleep on a condition variable between jobs.
class ThreadPool {
 public:
  /// `threads` counts the caller: a pool of 2 starts one worker.
  explicit ThreadPool(int threads) : size_(std::max(1, threads)) {
#if defined(__unix__) || defined(__APPLE__)
    pid_ = getpid();
#endif
    pin_this_library();
    workers_.reserve(static_cast<size_t>(size_ - 1));
    try {
      for (int i = 1; i < size_; ++i) workers_.emplace_back([this] { worker_loop(); });
    } catch (...) {
      // Out of threads: run with the workers that did start (maybe none).
    }
    size_ = static_cast<int>(workers_.size()) + 1;
  }
  // The pool lives as long as the process: it is created once and never destroyed, so that
  // exit() never waits for (or races with) sleeping workers.
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  /// Threads that work on a job (workers + the caller).
  int size() const { return size_; }

  /// Process id the pool was created in.
  long pid() const { return pid_; }

  /// Runs `job` on the caller and any worker that wakes in time. Returns false without running
  /// anything when another thread is using the pool.
  bool run(Job &job) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &job;
      ++generation_;
    }
    wake_.notify_all();
    in_parallel_region() = true;
    job.work();
    in_parallel_region() = false;
    {
      // Withdraw the job (late workers will not pick it up) and wait only for the workers that
      // did: they hold a reference to `job`, which lives on the caller's stack.
      std::unique_lock<std::mutex> lock(mu_);
      job_ = nullptr;
      done_.wait(lock, [this] { return active_ == 0; });
    }
    if (job.error) std::rethrow_exception(job.error);
    return true;
  }

 private:
  void worker_loop() {
    in_parallel_region() = true;
    uint64_t seen = 0;
    for (;;) {
      Job *job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return job_ != nullptr && generation_ != seen; });
        seen = generation_;
        job = job_;
        ++active_;
      }
      job->work();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (--active_ == 0) done_.notify_all();
      }
    }
  }

  int size_;
  long pid_ = 0;
  std::vector<std::thread> workers_;
  std::mutex busy_;  // held by the thread whose job the pool runs
  std::mutex mu_;    // guards job_, generation_, active_
  std::condition_variable wake_;
  std::condition_variable done_;
  Job *job_ = nullptr;
  uint64_t generation_ = 0;
  int active_ = 0;
};

/// The library's pool (created on first use; recreated in a forked child). nullptr when only
/// one thread is configured.
OPGEN_HIDDEN inline ThreadPool *thread_pool() {
  static std::atomic<ThreadPool *> pool{nullptr};
  static std::mutex create_mu;
  ThreadPool *p = pool.load(std::memory_order_acquire);
#if defined(__unix__) || defined(__APPLE__)
  if (p != nullptr && p->pid() == getpid()) return p;
#else
  if (p != nullptr) return p;
#endif
  const int threads = configured_threads();
  if (threads <= 1) return nullptr;
  std::lock_guard<std::mutex> lock(create_mu);
  p = pool.load(std::memory_order_acquire);
#if defined(__unix__) || defined(__APPLE__)
  if (p != nullptr && p->pid() == getpid()) return p;
#else
  if (p != nullptr) return p;
#endif
  // The parent's pool (if any) is leaked in a forked child: its threads do not exist there.
  p = new ThreadPool(threads);
  pool.store(p, std::memory_order_release);
  return p;
}

}  // namespace detail

/// Number of threads parallel_for may use (1 means loops always run on the calling thread).
inline int num_threads() {
  const int cap = detail::thread_cap();
  return cap > 0 ? std::min(cap, detail::configured_threads()) : detail::configured_threads();
}

/// Caps the threads of the loops the current thread starts while it lives (see thread_cap).
class ThreadCap {
 public:
  explicit ThreadCap(int threads) : prev_(detail::thread_cap()) { detail::thread_cap() = std::max(1, threads); }
  ~ThreadCap() { detail::thread_cap() = prev_; }
  ThreadCap(const ThreadCap &) = delete;
  ThreadCap &operator=(const ThreadCap &) = delete;

 private:
  int prev_;
};

/// Calls f(begin, end) on disjoint ranges covering [0, n) of at least `grain` items each: in
/// parallel on the library's thread pool when n >= 2 * grain (on the calling thread otherwise,
/// or when nested, or when another thread is using the pool). Use a grain that makes a chunk
/// worth ~kParallelGrain element operations (rows of a matrix: kParallelGrain / row length).
/// The first exception thrown by f is rethrown here after every running chunk has finished.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F &&f) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int cap = detail::thread_cap();
  if (n < 2 * grain || detail::in_parallel_region() || cap == 1) {
    f(int64_t{0}, n);
    return;
  }
  detail::ThreadPool *pool = detail::thread_pool();
  if (pool == nullptr) {
    f(int64_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  detail::Job job;
  job.call = [](void *ctx, int64_t b, int64_t e) { (*static_cast<Fn *>(ctx))(b, e); };
  job.ctx = const_cast<void *>(static_cast<const void *>(&f));
  job.n = n;
  // About 4 chunks per thread: balance when a core is busy with another process, few claims.
  // Under a cap below the pool's size: one chunk per allowed thread, so at most `cap` run at once.
  const int64_t parts = cap > 1 && cap < pool->size() ? int64_t{cap} : int64_t{4} * pool->size();
  job.chunk = std::max(grain, (n + parts - 1) / parts);
  if (!pool->run(job)) f(int64_t{0}, n);
}

/// parallel_for over elements: chunks of at least kParallelGrain elements.
template <typename F>
void parallel_for(int64_t n, F &&f) {
  parallel_for(n, kParallelGrain, std::forward<F>(f));
}

}  // namespace opgen

#endif  // OPGEN_PARALLEL_H_
