// CUDA kernels for my_add and my_fast_add, and their C launcher.
//
// Built by nvcc with gcc as host compiler. It must not include torch headers or
// the C++ standard library: the final link is done by zig against glibc 2.17
// with its own libc++, and anything from gcc's libstdc++ would leak newer
// GLIBC/GLIBCXX symbol versions into the wheel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "add_kernels.h"

#ifndef CEE_ARCH_LIST
#define CEE_ARCH_LIST "unknown (built without CEE_ARCH_LIST)"
#endif

namespace {

constexpr int kThreads = 256;
constexpr int kVecBytes = 16;

// a + b exactly as torch.add computes it: reduced floats in float32 then
// rounded to nearest even; integers wrap around (done in unsigned arithmetic
// because signed overflow is undefined behaviour in C++).
template <typename T>
struct Add {
  __device__ __forceinline__ static T apply(T a, T b) { return a + b; }
};
template <>
struct Add<__half> {
  __device__ __forceinline__ static __half apply(__half a, __half b) {
    return __float2half_rn(__half2float(a) + __half2float(b));
  }
};
template <>
struct Add<__nv_bfloat16> {
  __device__ __forceinline__ static __nv_bfloat16 apply(__nv_bfloat16 a,
                                                        __nv_bfloat16 b) {
    return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b));
  }
};
// Signed S added as its unsigned twin U, then converted back: wraps like torch.
template <typename S, typename U>
struct WrappingAdd {
  __device__ __forceinline__ static S apply(S a, S b) {
    return (S)((U)a + (U)b);
  }
};
template <>
struct Add<int8_t> : WrappingAdd<int8_t, uint8_t> {};
template <>
struct Add<int16_t> : WrappingAdd<int16_t, uint16_t> {};
template <>
struct Add<int32_t> : WrappingAdd<int32_t, uint32_t> {};
template <>
struct Add<int64_t> : WrappingAdd<int64_t, uint64_t> {};

// The baseline: one element per thread, 64-bit index.
template <typename T>
__global__ void add_simple_kernel(const T* __restrict__ a,
                                  const T* __restrict__ b, T* __restrict__ out,
                                  int64_t n) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = Add<T>::apply(a[i], b[i]);
}

// 16 bytes of T, loaded and stored as one 128-bit access.
template <typename T>
struct alignas(kVecBytes) Vec {
  T v[kVecBytes / sizeof(T)];
};

// Each block covers kThreads * VecsPerThread<T> 16-byte vectors; thread t
// takes vectors t, t + kThreads, ... (coalesced) and issues all its loads
// before any store. The last n % width elements (fewer than one vector) are
// done one by one by the first threads of the grid.
//
// Measured on the H100 (bench/NOTES.md): 4 vectors per thread helped the
// 2-byte types (8 conversions per vector) at 2^21..2^23 but cost float32 2-3%
// at large sizes; 4- and 8-byte types keep one vector per thread.
template <typename T>
__host__ __device__ constexpr int VecsPerThread() {
  return sizeof(T) <= 2 ? 4 : 1;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    add_vectorized_kernel(const T* __restrict__ a, const T* __restrict__ b,
                          T* __restrict__ out, int64_t n) {
  constexpr int kWidth = kVecBytes / sizeof(T);
  const int64_t n_vec = n / kWidth;
  const Vec<T>* va = reinterpret_cast<const Vec<T>*>(a);
  const Vec<T>* vb = reinterpret_cast<const Vec<T>*>(b);
  Vec<T>* vo = reinterpret_cast<Vec<T>*>(out);
  const int64_t base =
      (int64_t)blockIdx.x * kThreads * VecsPerThread<T>() + threadIdx.x;
  Vec<T> xa[VecsPerThread<T>()], xb[VecsPerThread<T>()];
#pragma unroll
  for (int k = 0; k < VecsPerThread<T>(); ++k) {
    const int64_t i = base + (int64_t)k * kThreads;
    if (i < n_vec) {
      xa[k] = va[i];
      xb[k] = vb[i];
    }
  }
#pragma unroll
  for (int k = 0; k < VecsPerThread<T>(); ++k) {
    const int64_t i = base + (int64_t)k * kThreads;
    if (i < n_vec) {
      Vec<T> r;
#pragma unroll
      for (int j = 0; j < kWidth; ++j)
        r.v[j] = Add<T>::apply(xa[k].v[j], xb[k].v[j]);
      vo[i] = r;
    }
  }
  const int64_t tail = n - n_vec * kWidth;
  const int64_t t = (int64_t)blockIdx.x * kThreads + threadIdx.x;
  if (t < tail) {
    const int64_t j = n_vec * kWidth + t;
    out[j] = Add<T>::apply(a[j], b[j]);
  }
}

int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

bool aligned16(const void* p) { return ((uintptr_t)p % kVecBytes) == 0; }

template <typename T>
cudaError_t launch(cee_kernel kernel, const void* a, const void* b, void* out,
                   int64_t n, cudaStream_t stream) {
  const T* ta = static_cast<const T*>(a);
  const T* tb = static_cast<const T*>(b);
  T* to = static_cast<T*>(out);
  // A slice such as x[1:] is not 16-byte aligned: the vector path would fault,
  // so such inputs take the scalar kernel (still correct, just not vectorized).
  if (kernel == CEE_KERNEL_VECTORIZED && aligned16(a) && aligned16(b) &&
      aligned16(out)) {
    // A block always has more threads than the tail (< 16 elements) needs, so
    // at least one block is launched.
    constexpr int kWidth = kVecBytes / sizeof(T);
    const int64_t n_vec = n / kWidth;
    const int64_t blocks =
        ceil_div(n_vec, (int64_t)kThreads * VecsPerThread<T>());
    const int64_t grid = blocks > 0 ? blocks : 1;
    add_vectorized_kernel<T><<<grid, kThreads, 0, stream>>>(ta, tb, to, n);
  } else {
    add_simple_kernel<T>
        <<<ceil_div(n, kThreads), kThreads, 0, stream>>>(ta, tb, to, n);
  }
  return cudaGetLastError();
}

cudaError_t dispatch(cee_kernel kernel, cee_dtype dtype, const void* a,
                     const void* b, void* out, int64_t n, cudaStream_t stream) {
  switch (dtype) {
    case CEE_FLOAT16: return launch<__half>(kernel, a, b, out, n, stream);
    case CEE_BFLOAT16:
      return launch<__nv_bfloat16>(kernel, a, b, out, n, stream);
    case CEE_FLOAT32: return launch<float>(kernel, a, b, out, n, stream);
    case CEE_FLOAT64: return launch<double>(kernel, a, b, out, n, stream);
    case CEE_INT8: return launch<int8_t>(kernel, a, b, out, n, stream);
    case CEE_INT16: return launch<int16_t>(kernel, a, b, out, n, stream);
    case CEE_INT32: return launch<int32_t>(kernel, a, b, out, n, stream);
    case CEE_INT64: return launch<int64_t>(kernel, a, b, out, n, stream);
    case CEE_UINT8: return launch<uint8_t>(kernel, a, b, out, n, stream);
  }
  return cudaErrorInvalidValue;
}

void describe_error(cudaError_t status, int device, const char* op, char* err,
                    size_t err_len) {
  if (status == cudaErrorNoKernelImageForDevice ||
      status == cudaErrorUnsupportedPtxVersion) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    snprintf(err, err_len,
             "%s: this cuda_ext_example wheel has no GPU code for cuda:%d "
             "(compute capability %d.%d, sm_%d%d). The wheel carries %s. "
             "Use a GPU from that list, or build from source for your GPU "
             "(see `python -m cuda_ext_example doctor`). [CUDA error: %s]",
             op, device, major, minor, major, minor, CEE_ARCH_LIST,
             cudaGetErrorString(status));
  } else if (status == cudaErrorInsufficientDriver) {
    snprintf(err, err_len,
             "%s: the NVIDIA driver is too old for this wheel's CUDA 13 "
             "runtime (it needs driver >= 580). Update the driver. "
             "[CUDA error: %s]",
             op, cudaGetErrorString(status));
  } else {
    snprintf(err, err_len, "%s: CUDA error on cuda:%d: %s (%s)", op, device,
             cudaGetErrorString(status), cudaGetErrorName(status));
  }
}

}  // namespace

extern "C" int cee_cuda_add(cee_kernel kernel, cee_dtype dtype, const void* a,
                            const void* b, void* out, int64_t n, int device,
                            void* stream, const char* op, char* err,
                            size_t err_len) {
  if (n == 0) return 0;
  // torch's device guard has already made `device` current through torch's
  // CUDA runtime; this (static) runtime follows the driver's current context,
  // but check, so a mismatch can never launch on the wrong GPU.
  int current = -1;
  cudaError_t status = cudaGetDevice(&current);
  if (status == cudaSuccess && current != device)
    status = cudaSetDevice(device);
  if (status == cudaSuccess)
    status = dispatch(kernel, dtype, a, b, out, n,
                      static_cast<cudaStream_t>(stream));
  if (status != cudaSuccess) describe_error(status, device, op, err, err_len);
  return (int)status;
}

extern "C" const char* cee_cuda_arch_list(void) { return CEE_ARCH_LIST; }
