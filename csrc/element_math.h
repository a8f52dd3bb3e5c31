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

// One element of an op: the rule applied to the op's inputs at one index, in
// Compute<T>.
template <typename Rule, typename T>
CEE_HOST_DEVICE T apply_rule(const T (&v)[1]) {
  typedef Compute<T> C;
  return C::out(Rule::apply(C::in(v[0])));
}
template <typename Rule, typename T>
CEE_HOST_DEVICE T apply_rule(const T (&v)[2]) {
  typedef Compute<T> C;
  return C::out(Rule::apply(C::in(v[0]), C::in(v[1])));
}
template <typename Rule, typename T>
CEE_HOST_DEVICE T apply_rule(const T (&v)[3]) {
  typedef Compute<T> C;
  return C::out(Rule::apply(C::in(v[0]), C::in(v[1]), C::in(v[2])));
}

}  // namespace cee
