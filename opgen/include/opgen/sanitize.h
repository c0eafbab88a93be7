// Shadow buffers for the sanitizer mode (opgen test/build --sanitize, OPGEN_SANITIZE=1).
//
// AddressSanitizer sees an overflow only past the end of a heap block it allocated. A kernel's
// tensors come from the framework (MindSpore's CPU memory pool, PyTorch's allocator): large
// blocks holding many tensors, so `out.data[out.numel + 3] = 1` lands inside one and corrupts a
// neighbour silently. In a build with -fsanitize=address (__SANITIZE_ADDRESS__), each view an
// entry point makes while a `ShadowScope` lives is backed by a heap copy of exactly its tensor's
// size: reads and writes past either end hit ASan's redzones and are reported with the kernel's
// stack (which names the YAML line through the bodies' #line directives). When the scope ends,
// outputs are copied back into the framework's memory. Without ASan, everything here compiles
// to nothing and the views point at the framework's memory, as always, except in checked mode
// (OPGEN_CHECKED), where the scope also runs the checks the entry point registered (the PyTorch
// outputs' guard bytes, opgen/torch.h) when the kernel is done.
//
// Shipped with opgen (not generated).
#ifndef OPGEN_SANITIZE_H_
#define OPGEN_SANITIZE_H_

#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

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
    for (auto &s : shadows_) {
      if (s.write_back && s.bytes) std::memcpy(s.original, s.copy.get(), s.bytes);
    }
    detail::active_shadows() = prev_;
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
#elif defined(OPGEN_CHECKED)
namespace detail {
/// Checks to run when the entry point's kernel is done (checked mode's output guards,
/// opgen/torch.h): each throws (an opgen::Error) when what it guards was overwritten.
inline std::vector<std::function<void()>> *&active_checks() {
  thread_local std::vector<std::function<void()>> *active = nullptr;
  return active;
}
}  // namespace detail

/// Checked mode (OPGEN_CHECKED, no sanitizer): while it lives, the outputs the current thread's
/// entry point allocates may register checks (detail::active_checks); at its end, when no
/// exception is in flight, they run, and the first that fails throws out of the destructor.
/// Every generated entry point declares its scope first inside its `try`, so its `catch` reports
/// that error as the op's. Views see the framework's memory, as without this mode.
class ShadowScope {
 public:
  ShadowScope() : prev_(detail::active_checks()) { detail::active_checks() = &checks_; }
  ~ShadowScope() noexcept(false) {
    detail::active_checks() = prev_;
    if (std::uncaught_exceptions() == 0) {
      for (auto &check : checks_) check();
    }
  }
  ShadowScope(const ShadowScope &) = delete;
  ShadowScope &operator=(const ShadowScope &) = delete;

 private:
  std::vector<std::function<void()>> checks_;
  std::vector<std::function<void()>> *prev_;
};

/// Views see the framework's memory.
template <typename E>
E *shadow(E *data, int64_t) {
  return data;
}
#else
/// No sanitizer: a ShadowScope does nothing.
class ShadowScope {};

/// No sanitizer: views see the framework's memory.
template <typename E>
E *shadow(E *data, int64_t) {
  return data;
}
#endif

}  // namespace opgen

#endif  // OPGEN_SANITIZE_H_
