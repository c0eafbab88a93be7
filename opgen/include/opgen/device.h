// opgen device portability: what a scalar function needs to be callable from CPU code and from
// CUDA device code alike, and the device error word that device code reports bad input through.
//
// OPGEN_HD marks a function `__host__ __device__` when nvcc compiles the unit (__CUDACC__) and is
// empty otherwise: g++ sees exactly the code it saw before. The scalar layer (opgen/half.h, the
// math functions and opgen::select of opgen/kernel.h) is OPGEN_HD; inside, `#if __CUDA_ARCH__`
// branches pick CUDA's own functions (expf, cvt.rn.f16.f32...) for device code, while CPU code
// keeps its std:: calls (which vectorise to libmvec).
//
// Device code cannot throw. A device function that finds a bad input (an integer division by
// zero, an index out of range) calls opgen::cuda::raise_on_device(code): the first code raised
// is kept in a word in device memory, and the host reads it when it asks (opgen::cuda::check_errors
// in opgen/cuda.h, which synchronises the stream: checked mode only). Without relocatable device
// code every .cu unit is its own device module, so the word is per translation unit: raise it and
// read it from the same unit (the op's .cu unit).
//
// Shipped with opgen (not generated). Framework-free.
#ifndef OPGEN_DEVICE_H_
#define OPGEN_DEVICE_H_

#include <string>

#if defined(__CUDACC__)
/// `__host__ __device__` under nvcc, nothing otherwise: a function both CPU and CUDA code call.
#define OPGEN_HD __host__ __device__
#else
#define OPGEN_HD
#endif

/// The head of a functor a kernel body passes to opgen's building blocks (opgen::map,
/// map_reduce_to...), written once for both devices: `OPGEN_LAMBDA(C v) noexcept -> C { return k * v; }`
/// is `[=](C v) ...` for the CPU and the extended lambda `[=] __host__ __device__ (C v) ...` for
/// CUDA (nvcc --extended-lambda), capturing by value (the attrs and sizes it reads: device code
/// cannot read the host's stack). A `[&]` or `[]` lambda is CPU only.
#define OPGEN_LAMBDA [=] OPGEN_HD

#ifndef OPGEN_HIDDEN
#if defined(__GNUC__) || defined(__clang__)
#define OPGEN_HIDDEN __attribute__((visibility("hidden")))
#else
#define OPGEN_HIDDEN
#endif
#endif

namespace opgen {
namespace cuda {

/// The codes device code raises (opgen::cuda::raise_on_device) and opgen::cuda::check_errors
/// turns into an opgen::Error. A body may raise its own codes from kFirstUserCode up.
enum ErrorCode : unsigned {
  kNoError = 0,
  kIntegerDivisionByZero = 1,   // "integer division by zero" (opgen::math::div)
  kIntegerDivisionOverflow = 2, // "integer division overflows" (opgen::math::div: INT_MIN / -1)
  kIndexOutOfRange = 3,         // "index out of range"
  kInvalidValue = 4,            // "an input's value is outside the op's domain"
  kFirstUserCode = 256,         // a body's own codes: "device error <code>"
};

/// The message of a device error code (ErrorCode): what opgen::cuda::check_errors and, on the
/// CPU, opgen::raise_in_kernel throw. Host only.
inline std::string error_message(unsigned code) {
  switch (code) {
    case kNoError: return "no error";
    case kIntegerDivisionByZero: return "integer division by zero";
    case kIntegerDivisionOverflow: return "integer division overflows";
    case kIndexOutOfRange: return "index out of range";
    case kInvalidValue: return "an input's value is outside the op's domain (its docstring says which)";
    default: return "device error " + std::to_string(code);
  }
}

#if defined(__CUDACC__)
namespace detail {
/// The device error word of this translation unit: 0, or the first code raised since it was
/// last read (see the header comment: one per .cu unit, one per device).
static __device__ unsigned int error_word;
}  // namespace detail

/// In device code: records `code` (non-zero) in this unit's error word unless an earlier code is
/// there, and returns. The kernel goes on (device code cannot throw): give the element a defined
/// value (0) and let the host raise the error when it reads the word (check_errors).
static __device__ inline void raise_on_device(unsigned code) { atomicCAS(&detail::error_word, 0u, code); }
#endif

}  // namespace cuda
}  // namespace opgen

#endif  // OPGEN_DEVICE_H_
