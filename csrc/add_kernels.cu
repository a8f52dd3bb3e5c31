// Device code of my_add and my_fast_add. Nothing here runs on the host.
//
// Compiled at build time by NVRTC (buildtools/device_code.py) to SASS for every
// arch in pyproject.toml, each by the oldest CUDA that knows it (12.0 or 12.9),
// plus PTX, packed into one fatbin that is
// embedded in the extension and launched through the driver API
// (csrc/launcher.cpp). CUDA 12 device code runs on every driver >= 525 (CUDA
// minor-version compatibility); CUDA 13's would need >= 580. NVRTC sees only
// this file and the CUDA headers it includes: no torch, no host code, no C++
// standard library. Which instances exist is declared in kernel_table.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "add_as_torch.h"

// NVRTC 12.0 emits nv/target's constants as internal device variables, named
// after a module id; with no external non-template function in the file that
// id includes the compiling process's id, and the same source gives different
// bytes on every build. One such function (never called, dropped from the
// cubin) makes the id a hash of the source: same commit, same bytes.
extern "C" __device__ void cee_reproducible_module_id() {}

namespace cee {

// a + b exactly as torch.add computes it (add_as_torch.h); the CUDA 16-bit
// float types add in float32 and round to nearest even, like c10's.
template <typename T>
struct Add {
  __device__ __forceinline__ static T apply(T a, T b) {
    return add_as_torch(a, b);
  }
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
// The baseline: one element per thread, 64-bit index.
template <typename T>
__global__ void add_simple_kernel(const T* __restrict__ a,
                                  const T* __restrict__ b, T* __restrict__ out,
                                  long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = Add<T>::apply(a[i], b[i]);
}

// The registers of one global access: 16 bytes (uint4) or 8 bytes (uint2).
template <int kBytes>
struct AccessOf;
template <>
struct AccessOf<16> {
  typedef uint4 type;
};
template <>
struct AccessOf<8> {
  typedef uint2 type;
};

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
                                             long long base, long long n_acc) {
  Access xa[kPerThread], xb[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const long long i = base + (long long)k * kBlock;
    if (!kChecked || i < n_acc) {
      xa[k] = va[i];
      xb[k] = vb[i];
    }
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const long long i = base + (long long)k * kBlock;
    if (!kChecked || i < n_acc) vo[i] = add_packed<T>(xa[k], xb[k]);
  }
}

// my_fast_add's kernel. Each thread moves kPerThread accesses of kBytes from
// each input; thread t of a block takes accesses t, t + kBlock, ...
// (coalesced) and issues all its loads before any store. Full blocks take an
// unguarded, straight-line path: with a guard per access, ptxas sinks the loads
// of 1- and 2-byte types next to their stores, leaving one access in flight per
// thread. The last n % width elements (fewer than one access) are done one by
// one by the first threads of the grid. The launcher guarantees the pointers
// are kBytes-aligned.
template <typename T, int kBytes, int kBlock, int kPerThread>
__global__ void __launch_bounds__(kBlock)
    add_vectorized_kernel(const T* __restrict__ a, const T* __restrict__ b,
                          T* __restrict__ out, long long n) {
  typedef typename AccessOf<kBytes>::type Access;
  constexpr int kWidth = kBytes / sizeof(T);  // elements per access
  const long long n_acc = n / kWidth;
  const Access* va = reinterpret_cast<const Access*>(a);
  const Access* vb = reinterpret_cast<const Access*>(b);
  Access* vo = reinterpret_cast<Access*>(out);
  const long long first = (long long)blockIdx.x * (kBlock * kPerThread);
  if (first + kBlock * kPerThread <= n_acc) {
    add_accesses<T, Access, kBlock, kPerThread, false>(
        va, vb, vo, first + threadIdx.x, n_acc);
  } else {
    add_accesses<T, Access, kBlock, kPerThread, true>(
        va, vb, vo, first + threadIdx.x, n_acc);
  }
  const long long tail = n - n_acc * kWidth;
  const long long t = (long long)blockIdx.x * kBlock + threadIdx.x;
  if (t < tail) {
    const long long j = n_acc * kWidth + t;
    out[j] = Add<T>::apply(a[j], b[j]);
  }
}

}  // namespace cee
