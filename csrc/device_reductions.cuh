// Device helpers for kernels that are not elementwise (ops/<folder>/kernels.cuh
// of a kind = "custom" declaration): compute types, 16-byte packs, and warp and
// block sums. Device code only, compiled by NVRTC with the op's kernels; no
// standard library.
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

inline __device__ float inverse_sqrt(float v) { return rsqrtf(v); }
inline __device__ double inverse_sqrt(double v) { return rsqrt(v); }

// The sum of v over the 32 lanes of a warp, in every lane.
template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sums of K values over the whole block, in every thread. `scratch` is
// shared memory of 32 * K values; every thread of the block must call it (it
// synchronizes twice, so the scratch can be reused by the next call).
template <int K, typename A>
__device__ __forceinline__ void block_sum(A (&v)[K], A* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    v[k] = warp_sum(v[k]);
    if (lane == 0) scratch[k * 32 + warp] = v[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < K; ++k)
    v[k] = warp_sum(lane < warps ? scratch[k * 32 + lane] : A(0));
  __syncthreads();
}

}  // namespace cee
