// a + b as torch.add computes it, for one element, in host and device code
// alike (ops.cpp's CPU kernel, add_kernels.cu, the harness's reference): the
// one place this rule is written.
// - Signed integers wrap around (two's complement), computed in the unsigned
//   twin type because signed overflow is undefined behaviour in C++.
// - Every other type adds in its own arithmetic: unsigned integers wrap by
//   definition; c10::Half / c10::BFloat16 add in float32 and round to nearest
//   even. The device code specializes __half / __nv_bfloat16 the same way.
// No standard library, so NVRTC compiles it too.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CEE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CEE_HOST_DEVICE inline
#endif

namespace cee {

template <typename T>
struct AddAs {  // the type a + b is computed in
  typedef T type;
};
template <>
struct AddAs<signed char> {
  typedef unsigned char type;
};
template <>
struct AddAs<short> {
  typedef unsigned short type;
};
template <>
struct AddAs<int> {
  typedef unsigned int type;
};
template <>
struct AddAs<long> {
  typedef unsigned long type;
};
template <>
struct AddAs<long long> {
  typedef unsigned long long type;
};

template <typename T>
CEE_HOST_DEVICE T add_as_torch(T a, T b) {
  typedef typename AddAs<T>::type U;
  return (T)((U)a + (U)b);
}

}  // namespace cee
