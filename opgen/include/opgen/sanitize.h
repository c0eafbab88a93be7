// Shadow buffers (opgen test/build --sanitize, OPGEN_SANITIZE=1) and guarded copies (checked
// mode, OPGEN_CHECKED) of the views an entry point hands its kernel.
//
// AddressSanitizer sees an overflow only past the end of a heap block it allocated. A kernel's
// tensors come from the framework (MindSpore's CPU memory pool, PyTorch's allocator): large
// blocks holding many tensors, so `out.data[out.numel + 3] = 1` lands inside one and corrupts a
// neighbour silently. In a build with -fsanitize=address (__SANITIZE_ADDRESS__), each view an
// entry point makes while a `ShadowScope` lives is backed by a heap copy of exactly its tensor's
// size: reads and writes past either end hit ASan's redzones and are reported with the kernel's
// stack (which names the YAML line through the bodies' #line directives). When the kernel is done
// (ShadowScope::done(), or the scope's end), outputs are copied back into the framework's memory.
//
// In checked mode (OPGEN_CHECKED, no sanitizer), each *writable* view of CPU memory (an output,
// an input the op writes in place, a gradient the backward fills) is backed by a copy on its own
// pages, followed by 64 or more guard bytes and an inaccessible page. The views' bounds checks
// (opgen/kernel.h) do not see writes through raw pointers (`y.data + r * D`); these do: a write
// into the guard bytes is found when the kernel is done and throws an opgen::Error naming the
// view (named by the kernel's OPGEN_NAME_VIEWS_AS prologue) and its role (for an output: its shape
// rule is smaller than what the body writes), and a write beyond them faults at once, on the
// inaccessible page. Either way the framework's memory around the buffer is never touched: the
// copy is written back (its own size only) when the kernel is done. This holds for every path
// whose views are made here (MindSpore's aot entry points, its Function<T> path, PyTorch's CPU
// kernels), because the framework's memory is copied rather than enlarged: MindSpore allocates an
// aot kernel's outputs itself. Views of device memory are never copied: a CUDA unit
// (OPGEN_DEVICE_CUDA) has no guards, and PyTorch's glue guards CPU tensors only (opgen/torch.h).
//
// Outside those two modes everything here compiles to nothing and the views point at the
// framework's memory.
//
// Shipped with opgen (not generated).
#ifndef OPGEN_SANITIZE_H_
#define OPGEN_SANITIZE_H_

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <type_traits>
#include <vector>

#if defined(OPGEN_CHECKED) && !defined(OPGEN_DEVICE_CUDA)
#include <sys/mman.h>
#include <unistd.h>

#include <new>
#include <string>

#include "opgen/kernel.h"
#endif

#if defined(__SANITIZE_ADDRESS__)
#define OPGEN_SHADOW_BUFFERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OPGEN_SHADOW_BUFFERS 1
#endif
#endif

namespace opgen {

#ifdef OPGEN_SHADOW_BUFFERS
namespace detail {
struct Shadow {
  void *original;
  std::unique_ptr<unsigned char[]> copy;
  size_t bytes;
  bool write_back;
};
inline std::vector<Shadow> *&active_shadows() {
  thread_local std::vector<Shadow> *active = nullptr;
  return active;
}
}  // namespace detail

/// While it lives, the views the current thread's entry point makes (shadow()) are heap copies
/// of exactly their tensors' sizes; at its end, the copies of outputs are written back.
class ShadowScope {
 public:
  ShadowScope() : prev_(detail::active_shadows()) { detail::active_shadows() = &shadows_; }
  ~ShadowScope() {
    // Unwinding from the kernel's error: the copies are dropped, not written back. The glue's
    // output tensors, declared after this scope, are already destroyed (writing into their freed
    // memory corrupted the heap), and a written input keeps its values (nothing half-written).
    if (std::uncaught_exceptions() == 0) done();
    shadows_.clear();
    detail::active_shadows() = prev_;
  }
  /// The kernel is done: outputs are copied back now (before glue that reads them) and the
  /// copies freed. Views made later (a second kernel call) are shadowed anew.
  void done() {
    for (auto &s : shadows_) {
      if (s.write_back && s.bytes) std::memcpy(s.original, s.copy.get(), s.bytes);
    }
    shadows_.clear();
  }
  ShadowScope(const ShadowScope &) = delete;
  ShadowScope &operator=(const ShadowScope &) = delete;

 private:
  std::vector<detail::Shadow> shadows_;
  std::vector<detail::Shadow> *prev_;
};

/// `data` (of `numel` elements of E) as a view should see it: a shadow copy in a sanitizer build
/// inside a ShadowScope (written back at its end unless E is const), `data` itself otherwise.
template <typename E>
E *shadow(E *data, int64_t numel) {
  std::vector<detail::Shadow> *active = detail::active_shadows();
  if (active == nullptr || data == nullptr || numel < 0) return data;
  const size_t bytes = static_cast<size_t>(numel) * sizeof(E);
  std::unique_ptr<unsigned char[]> copy(new unsigned char[bytes]);  // exactly: ASan's redzone follows
  if (bytes) std::memcpy(copy.get(), static_cast<const void *>(data), bytes);
  E *view = reinterpret_cast<E *>(copy.get());
  active->push_back({const_cast<void *>(static_cast<const void *>(data)), std::move(copy), bytes,
                     !std::is_const<E>::value});
  return view;
}
#elif defined(OPGEN_CHECKED) && !defined(OPGEN_DEVICE_CUDA)
namespace detail {
inline constexpr unsigned char kGuardByte = 0xA5;

/// "output 'y'" (from what OPGEN_NAME_VIEWS_AS said of the guarded view), for an error.
inline std::string guarded_words(const Guarded &g) {
  std::string name = "a view";
  if (g.name != nullptr) {
    const char *end = g.name;
    while (*end && *end != ',' && *end != ' ') ++end;
    name = "'" + std::string(g.name, end) + "'";
    if (g.item >= 0) name += "[" + std::to_string(g.item) + "]";
  }
  switch (g.role) {
    case 'o': return "output " + name;
    case 'w': return "input " + name + " (written in place)";
    case 'g': return "gradient " + name;
    default: return name == "a view" ? "a writable view" : "view " + name;
  }
}

/// Why a buffer of this role is the size it is, for an error.
inline const char *guarded_cause(char role) {
  switch (role) {
    case 'o': return "the output's shape rule is smaller than what the body writes";
    case 'w': return "the body writes more than the input holds";
    case 'g': return "the body writes more than the gradient holds (its input's size)";
    default: return "the body writes more than the buffer holds";
  }
}

/// The first byte of `g`'s guard that the kernel changed, or -1.
inline int64_t overwritten(const Guarded &g) {
  for (size_t k = 0; k < g.guard; ++k) {
    if (g.copy[g.bytes + k] != kGuardByte) return static_cast<int64_t>(k);
  }
  return -1;
}
}  // namespace detail

/// Checked mode (OPGEN_CHECKED, no sanitizer): while it lives, the writable views the current
/// thread's entry point makes (shadow()) see guarded copies of the framework's memory. done()
/// (called right after the kernel; else the scope's end) copies each back, frees it and, when a
/// kernel wrote into a guard, throws the op's error naming the view. Every generated entry point
/// declares its scope first inside its `try`, so that its `catch` reports that error as the op's.
class ShadowScope {
 public:
  ShadowScope() : prev_(detail::active_guards()) { detail::active_guards() = &guards_; }
  ~ShadowScope() noexcept(false) {
    detail::active_guards() = prev_;
    if (std::uncaught_exceptions() == 0) {
      done();
    } else {
      // Unwinding from the kernel's error (the one reported): the copies are dropped, not written
      // back. The glue's output tensors, declared after this scope, are already destroyed (writing
      // into their freed memory corrupted the heap), and a written input keeps its values.
      release(false);
    }
  }
  ShadowScope(const ShadowScope &) = delete;
  ShadowScope &operator=(const ShadowScope &) = delete;

  /// The kernel is done: every guarded copy is written back (its own size: what lies past it in
  /// the framework's memory is never touched) and freed; then, if the kernel wrote into a guard,
  /// throws an opgen::Error naming the first such view.
  void done() {
    std::string error;
    for (const auto &g : guards_) {
      const int64_t k = detail::overwritten(g);
      if (k < 0 || !error.empty()) continue;
      error = "checked mode: the kernel wrote past the end of " + detail::guarded_words(g) + " (" +
              std::to_string(g.bytes) + " bytes), " + std::to_string(k) + " bytes after its end: " +
              detail::guarded_cause(g.role);
    }
    release(true);
    if (!error.empty()) throw Error(error);
  }

 private:
  void release(bool write_back) {
    for (const auto &g : guards_) {
      if (write_back && g.bytes) std::memcpy(g.original, g.copy, g.bytes);
      munmap(g.base, g.mapped);
    }
    guards_.clear();
  }

  std::vector<detail::Guarded> guards_;
  std::vector<detail::Guarded> *prev_;
};

/// `data` (of `numel` elements of E) as a view should see it: for a writable view (E not const)
/// inside a ShadowScope, a copy at the end of its own mapping, followed by guard bytes and an
/// inaccessible page (see the top of this file), also when the tensor is empty; `data` itself
/// otherwise (read-only views).
template <typename E>
E *shadow(E *data, int64_t numel) {
  if constexpr (std::is_const<E>::value) {
    return data;
  }
  std::vector<detail::Guarded> *guards = detail::active_guards();
  // (an empty tensor's data may be null: it is guarded too, a body writing into it is the bug;
  // a view the glue leaves empty, an absent gradient, never reaches here)
  if (guards == nullptr || numel < 0 || (data == nullptr && numel != 0)) return data;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = static_cast<size_t>(numel) * sizeof(E);
  const size_t used = (bytes + 64 + 63) / 64 * 64;  // at least 64 guard bytes; the copy 64-aligned
  const size_t body = (used + page - 1) / page * page;
  void *base = mmap(nullptr, body + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  mprotect(static_cast<char *>(base) + body, page, PROT_NONE);
  unsigned char *copy = static_cast<unsigned char *>(base) + body - used;
  if (bytes) std::memcpy(copy, static_cast<const void *>(data), bytes);
  std::memset(copy + bytes, detail::kGuardByte, used - bytes);
  guards->push_back({const_cast<void *>(static_cast<const void *>(data)), copy, bytes, used - bytes, base,
                     body + page, nullptr, -1, 0});
  return reinterpret_cast<E *>(copy);
}
#else
/// Neither mode (or a CUDA unit, whose views are device memory): a ShadowScope does nothing.
class ShadowScope {
 public:
  void done() {}
};

/// Neither mode: views see the framework's memory.
template <typename E>
E *shadow(E *data, int64_t) {
  return data;
}
#endif

}  // namespace opgen

#endif  // OPGEN_SANITIZE_H_
