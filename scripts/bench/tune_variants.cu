// Variants of the vectorized add for the kernel sweeps of benchmarks/NOTES.md
// (sweep 1, change 7: cache hints, vectors per thread, index width; sweeps 2-10,
// changes 9-10 and 25-27 and 36, below). Not part of the package:
// scripts/bench/tune_variants.py loads this as a shared library with ctypes and times
// every variant next to torch.add, torch.compile and Triton with the same
// do_bench method as scripts/bench/benchmark.py.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC \
//        scripts/bench/tune_variants.cu -o build/tune/libtune_variants.so
//
// Sizes must be multiples of 16 bytes (the sweep uses powers of two): no tail.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

namespace {

// How the two input vectors are loaded.
enum Load {
  kLoadDefault,      // ld.global (cached in L1 and L2, normal eviction)
  kLoadStreaming,    // ld.global.cs: "accessed once", evict-first in L1 and L2
  kLoadLastUse,      // ld.global.lu
  kLoadNonCoherent,  // ld.global.nc (read-only path, __ldg)
  kLoadEvictFirst,   // L1::no_allocate + L2::cache_hint with an evict_first
                     // policy
  kLoadPlain,        // ld.global.v4 from PTX: LDG.E.128, not the .CONSTANT path
                     // that const __restrict__ pointers get (torch.add and
                     // Inductor's Triton kernels load this way)
  kLoadPlainNoL1,    // ld.global.L1::no_allocate.v4
  // sweep 8: the read-only load the package ships (ld.global.nc) with an L2
  // prefetch-size hint: the L2 fetches 128 or 256 bytes around each miss from
  // DRAM, not only the 32-byte sectors asked for (PTX ISA 7.4, sm_75+)
  kLoadNcL2_128,     // ld.global.nc.L2::128B.v4
  kLoadNcL2_256,     // ld.global.nc.L2::256B.v4
  kLoadPlainL2_256,  // ld.global.L2::256B.v4
};
// How the output vector is stored.
enum Store {
  kStoreDefault,    // st.global (write-back)
  kStoreStreaming,  // st.global.cs
};

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
               : "=l"(policy));
  return policy;
}

template <int L>
__device__ __forceinline__ uint4 load(const uint4* p, uint64_t policy) {
  if constexpr (L == kLoadStreaming) return __ldcs(p);
  if constexpr (L == kLoadLastUse) return __ldlu(p);
  if constexpr (L == kLoadNonCoherent) return __ldg(p);
  if constexpr (L == kLoadEvictFirst) {
    uint4 v;
    asm volatile(
        "ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, "
        "[%4], %5;"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p), "l"(policy));
    return v;
  }
  if constexpr (L == kLoadNcL2_128 || L == kLoadNcL2_256 ||
                L == kLoadPlainL2_256) {
    uint4 v;
    if constexpr (L == kLoadNcL2_128) {
      asm("ld.global.nc.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p));
    } else if constexpr (L == kLoadNcL2_256) {
      asm("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p));
    } else {
      asm("ld.global.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p));
    }
    return v;
  }
  if constexpr (L == kLoadPlain || L == kLoadPlainNoL1) {
    uint4 v;
    if constexpr (L == kLoadPlain) {
      asm("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p));
    } else {
      asm("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p));
    }
    return v;
  }
  return *p;
}

template <int S>
__device__ __forceinline__ void store(uint4* p, uint4 v) {
  if constexpr (S == kStoreStreaming) {
    __stcs(p, v);
  } else {
    *p = v;
  }
}

// a + b on the 16 bytes of a vector, rounded like torch.add (as in csrc/).
template <typename T>
__device__ __forceinline__ T add1(T a, T b) {
  return a + b;
}
template <>
__device__ __forceinline__ __half add1(__half a, __half b) {
  return __float2half_rn(__half2float(a) + __half2float(b));
}
template <>
__device__ __forceinline__ __nv_bfloat16 add1(__nv_bfloat16 a,
                                              __nv_bfloat16 b) {
  return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b));
}

// a + b on the elements packed in one access (uint4, uint2 or unsigned).
template <typename T, typename VecT>
__device__ __forceinline__ VecT add_packed(VecT x, VecT y) {
  constexpr int kWidth = sizeof(VecT) / sizeof(T);
  union U {
    VecT u;
    T t[kWidth];
  };
  U a, b, r;
  a.u = x;
  b.u = y;
#pragma unroll
  for (int j = 0; j < kWidth; ++j) r.t[j] = add1<T>(a.t[j], b.t[j]);
  return r.u;
}

// Bounds checks: on every access (kCheckAlways), none (kCheckNever: the grid
// must cover n_vec exactly), or only in the last block (kCheckLastBlock: the
// full blocks take an unpredicated path, as torch.add's vectorized kernel
// does).
enum Check { kCheckAlways, kCheckNever, kCheckLastBlock };

template <int kThreads, int V, int L, typename T, int S, typename I,
          bool kGuard>
__device__ __forceinline__ void add_block(const uint4* __restrict__ a,
                                          const uint4* __restrict__ b,
                                          uint4* __restrict__ out, I n_vec) {
  const uint64_t policy = L == kLoadEvictFirst ? evict_first_policy() : 0;
  const I base = (I)blockIdx.x * (I)(kThreads * V) + (I)threadIdx.x;
  uint4 xa[V], xb[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const I i = base + (I)(k * kThreads);
    if (!kGuard || i < n_vec) {
      xa[k] = load<L>(a + i, policy);
      xb[k] = load<L>(b + i, policy);
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const I i = base + (I)(k * kThreads);
    if (!kGuard || i < n_vec) store<S>(out + i, add_packed<T>(xa[k], xb[k]));
  }
}

// V vectors per thread (thread t of a block takes t, t + kThreads, ...), all
// loads before any store; I is the index type (int64_t, or uint32_t when the
// vector count fits).
template <typename T, int kThreads, int V, int L, int S, typename I, int C>
__global__ void __launch_bounds__(kThreads)
    add_variant(const uint4* __restrict__ a, const uint4* __restrict__ b,
                uint4* __restrict__ out, I n_vec) {
  if (C == kCheckNever ||
      (C == kCheckLastBlock && blockIdx.x + 1 < gridDim.x)) {
    add_block<kThreads, V, L, T, S, I, false>(a, b, out, n_vec);
  } else {
    add_block<kThreads, V, L, T, S, I, true>(a, b, out, n_vec);
  }
}

template <typename T, int kThreads, int V, int L, int S, typename I, int C>
int launch(const void* a, const void* b, void* out, int64_t n,
           cudaStream_t stream) {
  const int64_t n_vec = n * (int64_t)sizeof(T) / 16;
  if (sizeof(I) == 4 && n_vec >= ((int64_t)1 << 31)) return -1;
  const int64_t per_block = (int64_t)kThreads * V;
  if (C == kCheckNever && n_vec % per_block != 0) return -3;
  const int64_t grid = (n_vec + per_block - 1) / per_block;
  add_variant<T, kThreads, V, L, S, I, C><<<grid, kThreads, 0, stream>>>(
      static_cast<const uint4*>(a), static_cast<const uint4*>(b),
      static_cast<uint4*>(out), (I)n_vec);
  return (int)cudaGetLastError();
}

// Sweep 6: meant to ask whether fewer resident warps help (torch.add's bfloat16
// kernel keeps 12 blocks of 128 threads per SM, ours 16) by giving each block
// dynamic shared memory it never touches, so that only kBlocks fit in the
// carveout asked for. It does NOT cap them: Nsight Compute shows the driver
// choosing a larger shared config and keeping 16 blocks resident (NOTES change
// 26). What these variants do measure is the carveout's L1 cost; sweep 7 and
// aten_variants.cu cap the resident blocks for real. Each variant gets a kernel
// of its own (kTag), so that no attribute leaks into the others.
template <typename T, int kThreads, int L, int kTag>
__global__ void __launch_bounds__(kThreads)
    add_capped(const uint4* __restrict__ a, const uint4* __restrict__ b,
               uint4* __restrict__ out, int64_t n_vec) {
  add_block<kThreads, 1, L, T, kStoreDefault, int64_t, true>(a, b, out, n_vec);
}

// kCarveKB: the shared memory carveout asked for (the rest of the 256 KB is
// L1), the same for a capped variant and its control (kBlocks 0: no dynamic
// shared memory): left to the driver, the carveout grows with the dynamic
// shared memory, and an L1 of 28 KB alone costs a streaming add 4% on the H200
// (docs/results/2026-11-25-h200-bf16-gap-steady-state.log).
template <typename T, int kThreads, int L, int kBlocks, int kCarveKB>
int launch_capped(const void* a, const void* b, void* out, int64_t n,
                  cudaStream_t stream) {
  static int smem = -1;
  auto kernel = add_capped<T, kThreads, L, kBlocks * 1000 + kCarveKB>;
  if (smem < 0) {
    int per_sm = 0, reserved = 0;
    cudaDeviceGetAttribute(&per_sm,
                           cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0);
    cudaDeviceGetAttribute(&reserved,
                           cudaDevAttrReservedSharedMemoryPerBlock, 0);
    // rounded down: the driver rounds up to the next carveout it supports
    const int percent = kCarveKB * 1024 * 100 / per_sm;
    cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                         percent);
    smem = kBlocks == 0 ? 0 : (kCarveKB * 1024 / kBlocks - reserved) / 128 * 128;
    int resident = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads,
                                                  smem);
    // The occupancy API assumes the carveout asked for; the driver may not.
    fprintf(stderr,
            "capped variant: %d threads, carveout %d%%, %d B shared, occupancy "
            "API: %d blocks/SM\n",
            kThreads, percent, smem, resident);
  }
  const int64_t n_vec = n * (int64_t)sizeof(T) / 16;
  const int64_t grid = (n_vec + kThreads - 1) / kThreads;
  kernel<<<grid, kThreads, smem, stream>>>(static_cast<const uint4*>(a),
                                           static_cast<const uint4*>(b),
                                           static_cast<uint4*>(out), n_vec);
  return (int)cudaGetLastError();
}

// Sweep 4: narrower accesses. Inductor's autotuner picks XBLOCK=512 with 8
// warps at 2^28 float32: 256 threads, one 8-byte load per input per thread.
// VecT is the access (uint2: 8 bytes, unsigned: 4 bytes), V of them per
// thread, kPlain: 1 ld.global (LDG.E.64) instead of the .CONSTANT path, 2
// ld.global.nc with the L2::256B prefetch hint (8-byte accesses), 3 __ldg.
template <typename VecT, int kPlain>
__device__ __forceinline__ VecT load_narrow(const VecT* p) {
  if constexpr (kPlain == 2 && sizeof(VecT) == 8) {
    VecT v;
    asm("ld.global.nc.L2::256B.v2.u32 {%0, %1}, [%2];"
        : "=r"(v.x), "=r"(v.y)
        : "l"(p));
    return v;
  } else if constexpr (kPlain >= 2) {  // 3: __ldg, the package's load
    return __ldg(p);
  } else if constexpr (kPlain && sizeof(VecT) == 8) {
    VecT v;
    asm("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
  } else if constexpr (kPlain && sizeof(VecT) == 4) {
    VecT v;
    asm("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
  } else {
    return *p;
  }
}

template <typename T, typename VecT, int kThreads, int V, int kPlain>
__global__ void __launch_bounds__(kThreads)
    add_narrow(const VecT* __restrict__ a, const VecT* __restrict__ b,
               VecT* __restrict__ out, int64_t n_vec) {
  const int64_t base = (int64_t)blockIdx.x * (kThreads * V) + threadIdx.x;
  VecT xa[V], xb[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int64_t i = base + k * kThreads;
    if (i < n_vec) {
      xa[k] = load_narrow<VecT, kPlain>(a + i);
      xb[k] = load_narrow<VecT, kPlain>(b + i);
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int64_t i = base + k * kThreads;
    if (i < n_vec) out[i] = add_packed<T>(xa[k], xb[k]);
  }
}

template <typename T, typename VecT, int kThreads, int V, int kPlain>
int launch_narrow(const void* a, const void* b, void* out, int64_t n,
                  cudaStream_t stream) {
  const int64_t n_vec = n * (int64_t)sizeof(T) / sizeof(VecT);
  const int64_t per_block = (int64_t)kThreads * V;
  const int64_t grid = (n_vec + per_block - 1) / per_block;
  add_narrow<T, VecT, kThreads, V, kPlain><<<grid, kThreads, 0, stream>>>(
      static_cast<const VecT*>(a), static_cast<const VecT*>(b),
      static_cast<VecT*>(out), n_vec);
  return (int)cudaGetLastError();
}

// Sweep 5: does the 8-byte kernel win by having fewer bytes in flight? A
// grid-stride loop over kBlocksPerSm resident 256-thread blocks per SM caps the
// bytes in flight for 16-byte accesses too.
template <typename T, typename VecT, int kBlocksPerSm>
__global__ void __launch_bounds__(256)
    add_grid_stride(const VecT* __restrict__ a, const VecT* __restrict__ b,
                    VecT* __restrict__ out, int64_t n_vec) {
  const int64_t stride = (int64_t)gridDim.x * 256;
  for (int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x; i < n_vec;
       i += stride)
    out[i] = add_packed<T>(a[i], b[i]);
}

template <typename T, typename VecT, int kBlocksPerSm>
int launch_grid_stride(const void* a, const void* b, void* out, int64_t n,
                       cudaStream_t stream) {
  static int sms = 0;
  if (sms == 0) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int64_t n_vec = n * (int64_t)sizeof(T) / sizeof(VecT);
  int64_t grid = (n_vec + 255) / 256;
  if (grid > (int64_t)sms * kBlocksPerSm) grid = (int64_t)sms * kBlocksPerSm;
  add_grid_stride<T, VecT, kBlocksPerSm><<<grid, 256, 0, stream>>>(
      static_cast<const VecT*>(a), static_cast<const VecT*>(b),
      static_cast<VecT*>(out), n_vec);
  return (int)cudaGetLastError();
}

using Launcher = int (*)(const void*, const void*, void*, int64_t,
                         cudaStream_t);

struct Variant {
  const char* name;
  Launcher f32, bf16, f16;
};

#define VARIANT_TC(name, TH, V, L, S, I, C)  \
  {name, launch<float, TH, V, L, S, I, C>,   \
   launch<__nv_bfloat16, TH, V, L, S, I, C>, \
   launch<__half, TH, V, L, S, I, C>}
#define VARIANT_T(name, TH, V, L, S, I) \
  VARIANT_TC(name, TH, V, L, S, I, kCheckAlways)
#define VARIANT(name, V, L, S, I) VARIANT_T(name, 256, V, L, S, I)
#define GRID_STRIDE(name, VecT, B)             \
  {name, launch_grid_stride<float, VecT, B>,   \
   launch_grid_stride<__nv_bfloat16, VecT, B>, \
   launch_grid_stride<__half, VecT, B>}
#define CAPPED(name, TH, L, B, C)              \
  {name, launch_capped<float, TH, L, B, C>,      \
   launch_capped<__nv_bfloat16, TH, L, B, C>,    \
   launch_capped<__half, TH, L, B, C>}
#define NARROW(name, VecT, TH, V, PLAIN)             \
  {name, launch_narrow<float, VecT, TH, V, PLAIN>,   \
   launch_narrow<__nv_bfloat16, VecT, TH, V, PLAIN>, \
   launch_narrow<__half, VecT, TH, V, PLAIN>}

const Variant kVariants[] = {
    VARIANT("v1", 1, kLoadDefault, kStoreDefault, int64_t),
    VARIANT("v2", 2, kLoadDefault, kStoreDefault, int64_t),
    VARIANT("v4", 4, kLoadDefault, kStoreDefault, int64_t),
    VARIANT("v1-ldcs", 1, kLoadStreaming, kStoreDefault, int64_t),
    VARIANT("v2-ldcs", 2, kLoadStreaming, kStoreDefault, int64_t),
    VARIANT("v4-ldcs", 4, kLoadStreaming, kStoreDefault, int64_t),
    VARIANT("v1-ldcs-stcs", 1, kLoadStreaming, kStoreStreaming, int64_t),
    VARIANT("v2-ldcs-stcs", 2, kLoadStreaming, kStoreStreaming, int64_t),
    VARIANT("v4-ldcs-stcs", 4, kLoadStreaming, kStoreStreaming, int64_t),
    VARIANT("v1-ldlu", 1, kLoadLastUse, kStoreDefault, int64_t),
    VARIANT("v4-ldlu", 4, kLoadLastUse, kStoreDefault, int64_t),
    VARIANT("v1-ldnc", 1, kLoadNonCoherent, kStoreDefault, int64_t),
    VARIANT("v4-ldnc", 4, kLoadNonCoherent, kStoreDefault, int64_t),
    VARIANT("v1-ldef", 1, kLoadEvictFirst, kStoreDefault, int64_t),
    VARIANT("v4-ldef", 4, kLoadEvictFirst, kStoreDefault, int64_t),
    VARIANT("v1-ldcs-i32", 1, kLoadStreaming, kStoreDefault, uint32_t),
    VARIANT("v4-ldcs-i32", 4, kLoadStreaming, kStoreDefault, uint32_t),
    // sweep 2: plain LDG (no .CONSTANT), 128-thread blocks (torch.add's and
    // Inductor's block size), Inductor's shape (128 threads x 2 vectors, i32)
    VARIANT("v1-plain", 1, kLoadPlain, kStoreDefault, int64_t),
    VARIANT("v2-plain", 2, kLoadPlain, kStoreDefault, int64_t),
    VARIANT("v4-plain", 4, kLoadPlain, kStoreDefault, int64_t),
    VARIANT("v4-plainna", 4, kLoadPlainNoL1, kStoreDefault, int64_t),
    VARIANT_T("t128-v1-plain", 128, 1, kLoadPlain, kStoreDefault, int64_t),
    VARIANT_T("t128-v2-plain", 128, 2, kLoadPlain, kStoreDefault, int64_t),
    VARIANT_T("t128-v4-plain", 128, 4, kLoadPlain, kStoreDefault, int64_t),
    VARIANT_T("t128-v2", 128, 2, kLoadDefault, kStoreDefault, int64_t),
    VARIANT_T("t128-v4", 128, 4, kLoadDefault, kStoreDefault, int64_t),
    VARIANT_T("t128-v2-plainna", 128, 2, kLoadPlainNoL1, kStoreDefault,
              int64_t),
    VARIANT_T("t128-v2-plain-i32", 128, 2, kLoadPlain, kStoreDefault, uint32_t),
    // torch.add's bfloat16 kernel exactly: one vector, 128 threads, plain loads, 32-bit index
    VARIANT_T("t128-v1-plain-i32", 128, 1, kLoadPlain, kStoreDefault, uint32_t),
    VARIANT("v1-plain-i32", 1, kLoadPlain, kStoreDefault, uint32_t),
    VARIANT_T("t512-v2-plain", 512, 2, kLoadPlain, kStoreDefault, int64_t),
    // sweep 3: no bounds checks (full blocks only), and checks in the last
    // block only
    VARIANT_TC("v1-nochk", 256, 1, kLoadDefault, kStoreDefault, int64_t,
               kCheckNever),
    VARIANT_TC("v1-plain-nochk", 256, 1, kLoadPlain, kStoreDefault, int64_t,
               kCheckNever),
    VARIANT_TC("v4-nochk", 256, 4, kLoadDefault, kStoreDefault, int64_t,
               kCheckNever),
    VARIANT_TC("v4-plain-nochk", 256, 4, kLoadPlain, kStoreDefault, int64_t,
               kCheckNever),
    VARIANT_TC("t128-v2-plain-nochk", 128, 2, kLoadPlain, kStoreDefault,
               int64_t, kCheckNever),
    VARIANT_TC("t128-v2-plain-i32-nochk", 128, 2, kLoadPlain, kStoreDefault,
               uint32_t, kCheckNever),
    VARIANT_TC("t128-v4-nochk", 128, 4, kLoadDefault, kStoreDefault, int64_t,
               kCheckNever),
    VARIANT_TC("v1-lastchk", 256, 1, kLoadDefault, kStoreDefault, int64_t,
               kCheckLastBlock),
    VARIANT_TC("v4-lastchk", 256, 4, kLoadDefault, kStoreDefault, int64_t,
               kCheckLastBlock),
    VARIANT_TC("v4-plain-lastchk", 256, 4, kLoadPlain, kStoreDefault, int64_t,
               kCheckLastBlock),
    VARIANT_TC("t128-v2-plain-lastchk", 128, 2, kLoadPlain, kStoreDefault,
               int64_t, kCheckLastBlock),
    NARROW("w8-v1", uint2, 256, 1, false),
    NARROW("w8-v1-plain", uint2, 256, 1, true),
    NARROW("w8-v2", uint2, 256, 2, false),
    NARROW("w8-v4", uint2, 256, 4, false),
    NARROW("w8-t128-v2-plain", uint2, 128, 2, true),
    NARROW("w8-t512-v1", uint2, 512, 1, false),
    NARROW("w4-v2", unsigned, 256, 2, false),
    NARROW("w4-v4-plain", unsigned, 256, 4, true),
    GRID_STRIDE("gs-w16-b2", uint4, 2),
    GRID_STRIDE("gs-w16-b4", uint4, 4),
    GRID_STRIDE("gs-w16-b8", uint4, 8),
    GRID_STRIDE("gs-w8-b4", uint2, 4),
    GRID_STRIDE("gs-w8-b8", uint2, 8),
    NARROW("w16-t64-v1", uint4, 64, 1, false),
    // sweep 7: fewer resident warps through the block size alone: two
    // 768-thread blocks fill 1536 of an SM's 2048 threads (75%, torch.add's
    // bfloat16 occupancy, set by its registers), with no shared memory
    VARIANT_T("t768-v1-ldnc", 768, 1, kLoadNonCoherent, kStoreDefault, int64_t),
    VARIANT_T("t768-v1-plain", 768, 1, kLoadPlain, kStoreDefault, int64_t),
    NARROW("w8-t768-v1", uint2, 768, 1, false),
    CAPPED("t128-c32-b0", 128, kLoadPlain, 0, 32),
    CAPPED("t128-c32-b12", 128, kLoadPlain, 12, 32),
    CAPPED("t128-c32-b10", 128, kLoadPlain, 10, 32),
    CAPPED("v1nc-c32-b0", 256, kLoadNonCoherent, 0, 32),
    CAPPED("v1nc-c32-b6", 256, kLoadNonCoherent, 6, 32),
    CAPPED("t128-c16-b0", 128, kLoadPlain, 0, 16),
    CAPPED("t128-c16-b12", 128, kLoadPlain, 12, 16),
    // sweep 8: the shipped H200 shapes (16 B x1 and x2 in 128-thread blocks,
    // ld.global.nc) against the same with an L2 prefetch-size hint
    VARIANT_TC("t128-v1-ldnc", 128, 1, kLoadNonCoherent, kStoreDefault,
               int64_t, kCheckLastBlock),
    VARIANT_TC("t128-v2-ldnc", 128, 2, kLoadNonCoherent, kStoreDefault,
               int64_t, kCheckLastBlock),
    VARIANT_TC("t128-v1-nc128B", 128, 1, kLoadNcL2_128, kStoreDefault, int64_t,
               kCheckLastBlock),
    VARIANT_TC("t128-v1-nc256B", 128, 1, kLoadNcL2_256, kStoreDefault, int64_t,
               kCheckLastBlock),
    VARIANT_TC("t128-v2-nc128B", 128, 2, kLoadNcL2_128, kStoreDefault, int64_t,
               kCheckLastBlock),
    VARIANT_TC("t128-v2-nc256B", 128, 2, kLoadNcL2_256, kStoreDefault, int64_t,
               kCheckLastBlock),
    VARIANT_TC("t128-v2-pl256B", 128, 2, kLoadPlainL2_256, kStoreDefault,
               int64_t, kCheckLastBlock),
    VARIANT_TC("t768-v1-nc256B", 768, 1, kLoadNcL2_256, kStoreDefault, int64_t,
               kCheckLastBlock),
    NARROW("w8-t512-v1-nc", uint2, 512, 1, 3),
    // sweep 9: resident threads per SM through the block size alone, with the
    // shipped load (torch.add's bfloat16 kernel keeps 10-12 128-thread blocks,
    // 62-75%): 1024 x1 (one block, 50%), 896 x2 (87.5%), 768 x2 (75%),
    // 640 x3 (94%); 1024 with two accesses per thread (50%, twice the bytes
    // in flight per thread)
    VARIANT_TC("t1024-v1-ldnc", 1024, 1, kLoadNonCoherent, kStoreDefault,
               int64_t, kCheckLastBlock),
    VARIANT_TC("t1024-v2-ldnc", 1024, 2, kLoadNonCoherent, kStoreDefault,
               int64_t, kCheckLastBlock),
    VARIANT_TC("t896-v1-ldnc", 896, 1, kLoadNonCoherent, kStoreDefault,
               int64_t, kCheckLastBlock),
    VARIANT_TC("t768-v1-ldnc-last", 768, 1, kLoadNonCoherent, kStoreDefault,
               int64_t, kCheckLastBlock),
    VARIANT_TC("t640-v1-ldnc", 640, 1, kLoadNonCoherent, kStoreDefault,
               int64_t, kCheckLastBlock),
    // sweep 10: evict-first loads again, now that interleaved timing resolves
    // mid sizes (change 7 timed them with 5-10% spreads there): do_bench's
    // flush leaves L2 full of dirty lines, and inputs read once with an
    // evict_first policy should evict each other instead of those lines, whose
    // write-back would land inside the timed kernel. The shipped mid-size
    // shapes, each with the shipped load (ldnc) and with evict-first (ldef).
    VARIANT_TC("t128-v1-ldef", 128, 1, kLoadEvictFirst, kStoreDefault, int64_t,
               kCheckLastBlock),
    VARIANT_TC("t128-v2-ldef", 128, 2, kLoadEvictFirst, kStoreDefault, int64_t,
               kCheckLastBlock),
    VARIANT_TC("t256-v4-ldnc", 256, 4, kLoadNonCoherent, kStoreDefault,
               int64_t, kCheckLastBlock),
    VARIANT_TC("t256-v4-ldef", 256, 4, kLoadEvictFirst, kStoreDefault, int64_t,
               kCheckLastBlock),
    VARIANT_TC("t512-v2-ldnc", 512, 2, kLoadNonCoherent, kStoreDefault,
               int64_t, kCheckLastBlock),
    VARIANT_TC("t512-v2-ldef", 512, 2, kLoadEvictFirst, kStoreDefault, int64_t,
               kCheckLastBlock),
    NARROW("w8-t512-v1-nc256B", uint2, 512, 1, 2),
};

}  // namespace

extern "C" int tune_variant_count() {
  return (int)(sizeof(kVariants) / sizeof(kVariants[0]));
}

extern "C" const char* tune_variant_name(int v) { return kVariants[v].name; }

// dtype: 0 float32, 1 bfloat16, 2 float16. Returns a cudaError_t (0 = ok).
extern "C" int tune_add(int v, int dtype, const void* a, const void* b,
                        void* out, int64_t n, void* stream) {
  if (v < 0 || v >= tune_variant_count()) return -2;
  const Variant& var = kVariants[v];
  const Launcher f = dtype == 0 ? var.f32 : dtype == 1 ? var.bf16 : var.f16;
  return f(a, b, out, n, static_cast<cudaStream_t>(stream));
}
