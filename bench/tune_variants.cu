// Variants of the vectorized add for the cache-hint / vectors-per-thread /
// index-width sweep of bench/NOTES.md (change 7). Not part of the package:
// bench/tune_variants.py loads this as a shared library with ctypes and times
// every variant next to torch.add, torch.compile and Triton with the same
// do_bench method as scripts/benchmark.py.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC \
//        bench/tune_variants.cu -o build/tune/libtune_variants.so
//
// Sizes must be multiples of 16 bytes (the sweep uses powers of two): no tail.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;

// How the two input vectors are loaded.
enum Load {
  kLoadDefault,     // ld.global (cached in L1 and L2, normal eviction)
  kLoadStreaming,   // ld.global.cs: "accessed once", evict-first in L1 and L2
  kLoadLastUse,     // ld.global.lu
  kLoadNonCoherent, // ld.global.nc (read-only path, __ldg)
  kLoadEvictFirst,  // L1::no_allocate + L2::cache_hint with an evict_first policy
};
// How the output vector is stored.
enum Store {
  kStoreDefault,   // st.global (write-back)
  kStoreStreaming, // st.global.cs
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

template <typename T>
__device__ __forceinline__ uint4 add_vec(uint4 x, uint4 y) {
  constexpr int kWidth = 16 / sizeof(T);
  union U {
    uint4 u;
    T t[kWidth];
  };
  U a, b, r;
  a.u = x;
  b.u = y;
#pragma unroll
  for (int j = 0; j < kWidth; ++j) r.t[j] = add1<T>(a.t[j], b.t[j]);
  return r.u;
}

// V vectors per thread (thread t of a block takes t, t + kThreads, ...), all
// loads before any store; I is the index type (int64_t, or uint32_t when the
// vector count fits).
template <typename T, int V, int L, int S, typename I>
__global__ void __launch_bounds__(kThreads)
    add_variant(const uint4* __restrict__ a, const uint4* __restrict__ b,
                uint4* __restrict__ out, I n_vec) {
  const uint64_t policy = L == kLoadEvictFirst ? evict_first_policy() : 0;
  const I base = (I)blockIdx.x * (I)(kThreads * V) + (I)threadIdx.x;
  uint4 xa[V], xb[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const I i = base + (I)(k * kThreads);
    if (i < n_vec) {
      xa[k] = load<L>(a + i, policy);
      xb[k] = load<L>(b + i, policy);
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const I i = base + (I)(k * kThreads);
    if (i < n_vec) store<S>(out + i, add_vec<T>(xa[k], xb[k]));
  }
}

template <typename T, int V, int L, int S, typename I>
int launch(const void* a, const void* b, void* out, int64_t n,
           cudaStream_t stream) {
  const int64_t n_vec = n * (int64_t)sizeof(T) / 16;
  if (sizeof(I) == 4 && n_vec >= ((int64_t)1 << 31)) return -1;
  const int64_t per_block = (int64_t)kThreads * V;
  const int64_t grid = (n_vec + per_block - 1) / per_block;
  add_variant<T, V, L, S, I><<<grid, kThreads, 0, stream>>>(
      static_cast<const uint4*>(a), static_cast<const uint4*>(b),
      static_cast<uint4*>(out), (I)n_vec);
  return (int)cudaGetLastError();
}

using Launcher = int (*)(const void*, const void*, void*, int64_t,
                         cudaStream_t);

struct Variant {
  const char* name;
  Launcher f32, bf16, f16;
};

#define VARIANT(name, V, L, S, I)                                          \
  {                                                                         \
    name, launch<float, V, L, S, I>, launch<__nv_bfloat16, V, L, S, I>,   \
        launch<__half, V, L, S, I>                                          \
  }

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
