// Device helpers for an op's own kernels (ops/<folder>/kernels.cuh): compute
// types, 16-byte packs, hinted loads, and warp and block sums and maxima.
// Device code only, compiled by NVRTC with the op's kernels; no standard
// library.
#pragma once

#include "element_math.h"

namespace cee {

// What a dtype accumulates in: float for the 16-bit floats and float, double
// for double (Compute<T>::in and ::out convert).
template <typename T>
using Accumulate = typename Compute<T>::type;

// W elements of T read or written as one access (16 bytes for W = 16 /
// sizeof(T)); W = 1 is a plain element.
template <typename T, int W>
struct alignas(sizeof(T) * W) Pack {
  T v[W];
};

// Elements per 16-byte access, or 1 when the kernel was asked for no vectors.
template <typename T, bool kVector>
struct PackWidth {
  static constexpr int value = kVector ? 16 / (int)sizeof(T) : 1;
};

// A 16-byte pack read with an eviction priority in L1 and L2 (sm_80 and up;
// a plain read before, and for other sizes): load_to_reuse for data read
// again soon (a row read for a sum and again for the output, a weight that
// every row reads), load_last_use for its last read. Triton's evict_last and
// evict_first lower to the same. volatile: the compiler must not hoist a read
// above the bounds check that guards it.
template <bool kReuse, typename P>
__device__ __forceinline__ P load_hinted(const P* p) {
#if __CUDA_ARCH__ >= 800
  if constexpr (sizeof(P) == 16) {
    unsigned r[4];
    unsigned long long policy;
    if constexpr (kReuse) {
      asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;"
                   : "=l"(policy));
      asm volatile(
          "ld.global.L1::evict_last.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, "
          "[%4], %5;"
          : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
          : "l"(p), "l"(policy));
    } else {
      asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
                   : "=l"(policy));
      asm volatile(
          "ld.global.L1::evict_first.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, "
          "[%4], %5;"
          : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
          : "l"(p), "l"(policy));
    }
    return *reinterpret_cast<const P*>(r);
  }
#endif
  return *p;
}
template <typename P>
__device__ __forceinline__ P load_to_reuse(const P* p) {
  return load_hinted<true>(p);
}
template <typename P>
__device__ __forceinline__ P load_last_use(const P* p) {
  return load_hinted<false>(p);
}

inline __device__ float inverse_sqrt(float v) { return rsqrtf(v); }
inline __device__ double inverse_sqrt(double v) { return rsqrt(v); }

// How two values combine in a reduction, and what a lane with no value
// holds: a sum, or a maximum (NaN wins, as in torch.max).
struct Sum {
  template <typename A>
  __device__ static A combine(A a, A b) {
    return a + b;
  }
  template <typename A>
  __device__ static A identity() {
    return A(0);
  }
};
struct Max {
  template <typename A>
  __device__ static A combine(A a, A b) {
    return b > a || b != b ? b : a;
  }
  template <typename A>
  __device__ static A identity() {
    if constexpr (sizeof(A) == 8)
      return -__longlong_as_double(0x7ff0000000000000ll);
    else
      return -__int_as_float(0x7f800000);
  }
};

// v combined over the 32 lanes of a warp, in every lane.
template <typename Op, typename A>
__device__ __forceinline__ A warp_reduce(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
  return warp_reduce<Sum>(v);
}
template <typename A>
__device__ __forceinline__ A warp_max(A v) {
  return warp_reduce<Max>(v);
}

// The sum of v over each aligned group of `width` lanes (a power of two up to
// 32), in every lane of the group: a reduction over rows shorter than a warp.
// Every lane of the warp must call it.
template <typename A>
__device__ __forceinline__ A lanes_sum(A v, int width) {
  for (int offset = width >> 1; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// K values, each combined over the whole block, in every thread. `scratch` is
// shared memory of 32 * K values; every thread of the block must call it (it
// synchronizes twice, so the scratch can be reused by the next call).
template <typename Op, int K, typename A>
__device__ __forceinline__ void block_reduce(A (&v)[K], A* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    v[k] = warp_reduce<Op>(v[k]);
    if (lane == 0) scratch[k * 32 + warp] = v[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < K; ++k)
    v[k] = warp_reduce<Op>(lane < warps ? scratch[k * 32 + lane]
                                        : Op::template identity<A>());
  __syncthreads();
}
template <int K, typename A>
__device__ __forceinline__ void block_sum(A (&v)[K], A* scratch) {
  block_reduce<Sum, K>(v, scratch);
}
template <int K, typename A>
__device__ __forceinline__ void block_max(A (&v)[K], A* scratch) {
  block_reduce<Max, K>(v, scratch);
}

// The sums of K values over each aligned group of `row_threads` threads of
// the block, in every thread of the group: a power of two up to 32 (a block
// of several short rows, each summed within its lanes), or the whole block.
// `scratch` as for block_sum; every thread of the block must call it.
template <int K, typename A>
__device__ __forceinline__ void rows_sum(A (&v)[K], A* scratch,
                                         int row_threads) {
  if (row_threads > 32) return block_sum<K>(v, scratch);
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = lanes_sum(v[k], row_threads);
}

}  // namespace cee
