// The arithmetic an element rule (ops/*/rule.h) runs in, on the host and the
// GPU alike: the one place that says how each dtype computes, so a rule is
// written once, as plain C++ on one type C (`return a + b;`), and equals torch
// bit for bit.
//
// cee::Compute<T>::type is C for storage type T:
// - signed integers compute in an unsigned type of at least 32 bits: overflow
// wraps (two's
//   complement, as torch's does) without C++'s undefined behaviour, and
//   8/16-bit values never promote to a signed int that could overflow;
// - 16-bit floats compute in float and round back to nearest even, as c10::Half
// and
//   c10::BFloat16 (and torch's CUDA kernels) do. The device types (__half,
//   __nv_bfloat16) are specialized here, the host types (torch's header-only
//   c10::Half and c10::BFloat16) in csrc/host_float16.h;
// - every other type computes in itself.
// No standard library: NVRTC compiles this too.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CEE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CEE_HOST_DEVICE inline
#endif

#if defined(__CUDACC_RTC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#include <math.h>
#endif

namespace cee {

template <typename T>
struct Compute {  // computes in T itself
  typedef T type;
  static CEE_HOST_DEVICE type in(T x) { return x; }
  static CEE_HOST_DEVICE T out(type c) { return c; }
};

template <typename T, typename U>
struct ComputeAsUnsigned {  // wraps modulo 2^bits(T) on the way out
  typedef U type;
  static CEE_HOST_DEVICE type in(T x) { return (U)x; }
  static CEE_HOST_DEVICE T out(type c) { return (T)c; }
};
template <>
struct Compute<signed char> : ComputeAsUnsigned<signed char, unsigned int> {};
template <>
struct Compute<unsigned char> : ComputeAsUnsigned<unsigned char, unsigned int> {
};
template <>
struct Compute<short> : ComputeAsUnsigned<short, unsigned int> {};
template <>
struct Compute<unsigned short>
    : ComputeAsUnsigned<unsigned short, unsigned int> {};
template <>
struct Compute<int> : ComputeAsUnsigned<int, unsigned int> {};
template <>
struct Compute<long> : ComputeAsUnsigned<long, unsigned long long> {};
template <>
struct Compute<long long> : ComputeAsUnsigned<long long, unsigned long long> {};

#if defined(__CUDACC_RTC__)
template <>
struct Compute<__half> {
  typedef float type;
  static CEE_HOST_DEVICE float in(__half x) { return __half2float(x); }
  static CEE_HOST_DEVICE __half out(float c) { return __float2half_rn(c); }
};
template <>
struct Compute<__nv_bfloat16> {
  typedef float type;
  static CEE_HOST_DEVICE float in(__nv_bfloat16 x) {
    return __bfloat162float(x);
  }
  static CEE_HOST_DEVICE __nv_bfloat16 out(float c) {
    return __float2bfloat16_rn(c);
  }
};
#endif

// ------------------------------------------------------------------ math
// The functions a rule may call, the same on the host (the CPU kernels: the C
// library's) and the GPU (CUDA's), for float and double (16-bit floats compute
// in float). Bit-equal on both and to torch: +, -, *, /, sqrt, fma, minimum,
// maximum, abs (IEEE-exact). The others (exp, log, tanh, erf, pow, sin, ...)
// are within an ulp or two of exact, and so are torch's, whose CPU kernels use
// their own vectorized versions (which depend on the CPU's ISA and
// ATEN_CPU_CAPABILITY): an op that calls them declares a tolerance.
// a * b + c is never fused by the compilers (host: -ffp-contract=off; NVRTC:
// --fmad=false): a rule that wants one rounding says fma(a, b, c).
#if defined(__CUDACC_RTC__)
#define CEE_MATH_1(name, float_fn, double_fn)                   \
  CEE_HOST_DEVICE float name(float x) { return ::float_fn(x); } \
  CEE_HOST_DEVICE double name(double x) { return ::double_fn(x); }
#define CEE_MATH_2(name, float_fn, double_fn)                               \
  CEE_HOST_DEVICE float name(float x, float y) { return ::float_fn(x, y); } \
  CEE_HOST_DEVICE double name(double x, double y) { return ::double_fn(x, y); }
#else
#define CEE_MATH_1(name, float_fn, double_fn)          \
  inline float name(float x) { return ::float_fn(x); } \
  inline double name(double x) { return ::double_fn(x); }
#define CEE_MATH_2(name, float_fn, double_fn)                      \
  inline float name(float x, float y) { return ::float_fn(x, y); } \
  inline double name(double x, double y) { return ::double_fn(x, y); }
#endif
CEE_MATH_1(exp, expf, exp)
CEE_MATH_1(expm1, expm1f, expm1)
CEE_MATH_1(log, logf, log)
CEE_MATH_1(log1p, log1pf, log1p)
CEE_MATH_1(sqrt, sqrtf, sqrt)
CEE_MATH_1(tanh, tanhf, tanh)
CEE_MATH_1(erf, erff, erf)
CEE_MATH_1(sin, sinf, sin)
CEE_MATH_1(cos, cosf, cos)
CEE_MATH_1(abs, fabsf, fabs)
CEE_MATH_2(pow, powf, pow)
#undef CEE_MATH_1
#undef CEE_MATH_2

// a / b within 2 ulp: on the GPU, float division by reciprocal (__fdividef:
// two instructions, where IEEE division adds a check and a slow-path call per
// element, which is what a compute-bound op pays for); exact on the host and
// for double. For an op that declares a tolerance.
CEE_HOST_DEVICE float fast_divide(float a, float b) {
#if defined(__CUDACC_RTC__)
  return __fdividef(a, b);
#else
  return a / b;
#endif
}
CEE_HOST_DEVICE double fast_divide(double a, double b) { return a / b; }

CEE_HOST_DEVICE float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
CEE_HOST_DEVICE double fma(double a, double b, double c) {
  return ::fma(a, b, c);
}

// torch.maximum / torch.minimum: NaN if either is NaN (fmax would drop it);
// any compute type.
template <typename C>
CEE_HOST_DEVICE C maximum(C a, C b) {
  return a != a ? a : (b != b ? b : (a > b ? a : b));
}
template <typename C>
CEE_HOST_DEVICE C minimum(C a, C b) {
  return a != a ? a : (b != b ? b : (a < b ? a : b));
}

}  // namespace cee
