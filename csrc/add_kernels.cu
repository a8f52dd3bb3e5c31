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

constexpr int kThreads = 256;  // my_add's block, and the 16-byte path's

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

// Add<T> over the elements packed in one access. The union is the CUDA idiom
// for viewing the access's registers as T.
template <typename T, typename Access>
__device__ __forceinline__ Access add_packed(Access x, Access y) {
  union Packed {
    Access raw;
    T v[sizeof(Access) / sizeof(T)];
  };
  Packed a, b, r;
  a.raw = x;
  b.raw = y;
#pragma unroll
  for (int j = 0; j < (int)(sizeof(Access) / sizeof(T)); ++j)
    r.v[j] = Add<T>::apply(a.v[j], b.v[j]);
  return r.raw;
}

// kPerThread accesses of one thread: all loads, then the adds and stores.
// kChecked: guard each access against n_acc (the grid's last block only).
template <typename T, typename Access, int kBlock, int kPerThread,
          bool kChecked>
__device__ __forceinline__ void add_accesses(const Access* __restrict__ va,
                                             const Access* __restrict__ vb,
                                             Access* __restrict__ vo,
                                             int64_t base, int64_t n_acc) {
  Access xa[kPerThread], xb[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t i = base + (int64_t)k * kBlock;
    if (!kChecked || i < n_acc) {
      xa[k] = va[i];
      xb[k] = vb[i];
    }
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t i = base + (int64_t)k * kBlock;
    if (!kChecked || i < n_acc) vo[i] = add_packed<T>(xa[k], xb[k]);
  }
}

// my_fast_add's kernel. Each thread moves kPerThread accesses of type Access
// (uint4: 16 bytes, uint2: 8 bytes) from each input; thread t of a block takes
// accesses t, t + kBlock, ... (coalesced) and issues all its loads before any
// store. Full blocks take an unguarded, straight-line path: with a guard per
// access, ptxas sank the loads of 1- and 2-byte types next to their stores
// (one vector in flight per thread: float16 2-3% slower, bench/NOTES.md change
// 7). The last n % width elements (fewer than one access) are done one by one
// by the first threads of the grid.
template <typename T, typename Access, int kBlock, int kPerThread>
__global__ void __launch_bounds__(kBlock)
    add_vectorized_kernel(const T* __restrict__ a, const T* __restrict__ b,
                          T* __restrict__ out, int64_t n) {
  constexpr int kWidth = sizeof(Access) / sizeof(T);  // elements per access
  const int64_t n_acc = n / kWidth;
  const Access* va = reinterpret_cast<const Access*>(a);
  const Access* vb = reinterpret_cast<const Access*>(b);
  Access* vo = reinterpret_cast<Access*>(out);
  const int64_t first = (int64_t)blockIdx.x * (kBlock * kPerThread);
  if (first + kBlock * kPerThread <= n_acc) {
    add_accesses<T, Access, kBlock, kPerThread, false>(
        va, vb, vo, first + threadIdx.x, n_acc);
  } else {
    add_accesses<T, Access, kBlock, kPerThread, true>(
        va, vb, vo, first + threadIdx.x, n_acc);
  }
  const int64_t tail = n - n_acc * kWidth;
  const int64_t t = (int64_t)blockIdx.x * kBlock + threadIdx.x;
  if (t < tail) {
    const int64_t j = n_acc * kWidth + t;
    out[j] = Add<T>::apply(a[j], b[j]);
  }
}

int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

bool aligned(const void* p, uintptr_t bytes) {
  return ((uintptr_t)p % bytes) == 0;
}

template <typename T, typename Access, int kBlock, int kPerThread>
void launch_vectorized(const T* a, const T* b, T* out, int64_t n,
                       cudaStream_t stream) {
  // A block always has more threads than the tail (< 16 elements) needs, so
  // at least one block is launched.
  const int64_t n_acc = n / (int64_t)(sizeof(Access) / sizeof(T));
  const int64_t blocks = ceil_div(n_acc, (int64_t)kBlock * kPerThread);
  const int64_t grid = blocks > 0 ? blocks : 1;
  add_vectorized_kernel<T, Access, kBlock, kPerThread>
      <<<grid, kBlock, 0, stream>>>(a, b, out, n);
}

// The kernel shape by size per tensor, measured on the H100 (bench/NOTES.md,
// changes 7-9): up to 2 MiB, one 16-byte vector per thread; up to 64 MiB,
// four per thread (more bytes in flight per thread: ~2% at 2^20..2^23
// float32); above, one 8-byte access per thread in 512-thread blocks, the
// shape Inductor's autotuner picks for a large add, which streams ~1% faster
// than any 16-byte shape we tried (block size, vectors per thread,
// grid-stride, cache hints, bounds checks).
constexpr int64_t kSmallBytes = int64_t(2) << 20;
constexpr int64_t kLargeBytes = int64_t(64) << 20;

template <typename T>
cudaError_t launch(cee_kernel kernel, const void* a, const void* b, void* out,
                   int64_t n, cudaStream_t stream) {
  const T* ta = static_cast<const T*>(a);
  const T* tb = static_cast<const T*>(b);
  T* to = static_cast<T*>(out);
  // A slice such as x[1:] is not aligned to the access size: the vector path
  // would fault, so such inputs take the scalar kernel (correct, not
  // vectorized).
  auto all_aligned = [&](uintptr_t bytes) {
    return aligned(a, bytes) && aligned(b, bytes) && aligned(out, bytes);
  };
  const int64_t bytes = n * (int64_t)sizeof(T);
  const bool vectorized = kernel == CEE_KERNEL_VECTORIZED;
  if (vectorized && bytes > kLargeBytes && all_aligned(8)) {
    launch_vectorized<T, uint2, 512, 1>(ta, tb, to, n, stream);
  } else if (vectorized && bytes > kSmallBytes && all_aligned(16)) {
    launch_vectorized<T, uint4, kThreads, 4>(ta, tb, to, n, stream);
  } else if (vectorized && all_aligned(16)) {
    launch_vectorized<T, uint4, kThreads, 1>(ta, tb, to, n, stream);
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
