// The elementwise kernels every op of ops/ runs, as templates over its rule.
// Device code only: compiled at build time by NVRTC
// (buildtools/device_code.py), each instance named by a name expression such as
//   cee::elementwise_vectorized<cee_ops::Add, float, 2, 16, 256, 4,
//                               cee::kLoadReadOnly>
// that buildtools/device_code.py derives from the op declarations and the
// launch shapes. NVRTC sees only this file, the rules, their generated
// signatures and the CUDA headers: no torch, no host code, no C++ standard
// library.
//
// Every kernel is a template over the op's signature Sig (the generated
// adapter between these kernels and the rule's apply: how many inputs and
// outputs, which inputs it updates in place, its scalars) and the storage type
// T; its parameters are those of csrc/elementwise_args.h.
#pragma once

#include "elementwise_args.h"

namespace cee {

template <typename Sig, typename T>
using ScalarsOf = typename Sig::template Scalars<typename Compute<T>::type>;
template <typename Sig, typename T>
using PointersOf = Pointers<T, Sig::kInputs, Sig::kOutputs>;

// Stores one element's results: the outputs, and the inputs updated in place.
template <typename Sig, typename T>
__device__ __forceinline__ void store_element(
    const PointersOf<Sig, T>& p, const T (&v)[Sig::kInputs],
    const T (&o)[AtLeastOne<Sig::kOutputs>::value], long long i,
    const long long* in_offsets) {
#pragma unroll
  for (int k = 0; k < Sig::kInputs; ++k)
    if (Sig::kMutated & (1u << k))
      p.in[k][in_offsets ? in_offsets[k] : i] = v[k];
#pragma unroll
  for (int j = 0; j < Sig::kOutputs; ++j) p.out[j][i] = o[j];
}

// The baseline: one element per thread, 64-bit index; same-shape contiguous
// tensors.
template <typename Sig, typename T>
__global__ void elementwise_simple(PointersOf<Sig, T> p, ScalarsOf<Sig, T> s,
                                   long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T v[Sig::kInputs], o[AtLeastOne<Sig::kOutputs>::value];
#pragma unroll
  for (int k = 0; k < Sig::kInputs; ++k) v[k] = p.in[k][i];
  apply_element<Sig>(v, o, s);
  store_element<Sig>(p, v, o, i, nullptr);
}

// Any shapes that broadcast, any strides (views, transposes, Python numbers as
// 0-dim tensors): each input read where its strides say, nothing expanded in
// memory. The outputs are new and contiguous.
template <typename Sig, typename T>
__global__ void elementwise_strided(PointersOf<Sig, T> p, ScalarsOf<Sig, T> s,
                                    Strided<Sig::kInputs> g, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  long long off[Sig::kInputs];
  g.offsets(i, off);
  T v[Sig::kInputs], o[AtLeastOne<Sig::kOutputs>::value];
#pragma unroll
  for (int k = 0; k < Sig::kInputs; ++k) v[k] = p.in[k][off[k]];
  apply_element<Sig>(v, o, s);
  store_element<Sig>(p, v, o, i, off);
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

// A read-only (non-coherent) load: the pointers sit in a struct, where the
// compiler cannot see they are __restrict__, so ld.global.nc is asked for by
// name.
__device__ __forceinline__ uint4 load_readonly(const uint4* p) {
  return __ldg(p);
}
__device__ __forceinline__ uint2 load_readonly(const uint2* p) {
  return __ldg(p);
}

// How the vectorized kernel loads its inputs: a launch shape's `load`
// (tuning/launch_shapes.toml). Evict-first loads skip L1 and mark their lines
// first to go from L2, so that inputs read once evict each other rather than
// lines still wanted (the output, a next op's data): 1.5-2.5% faster at <= 8
// MiB per tensor on the H100 and H200, slower from 32 MiB
// (docs/PERFORMANCE.md), hence a choice per shape that each GPU's table makes.
enum LoadFlavour { kLoadReadOnly = 0, kLoadEvictFirst = 1 };

// The L2 policy of evict-first loads, made once per thread. The cache-hint
// loads and createpolicy need sm_80; older archs take the read-only load.
__device__ __forceinline__ unsigned long long evict_first_policy() {
#if __CUDA_ARCH__ >= 800
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
               : "=l"(policy));
  return policy;
#else
  return 0;
#endif
}

__device__ __forceinline__ uint4 load_evict_first(const uint4* p,
                                                  unsigned long long policy) {
#if __CUDA_ARCH__ >= 800
  uint4 v;
  asm volatile(
      "ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, "
      "[%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
#else
  return load_readonly(p);
#endif
}
__device__ __forceinline__ uint2 load_evict_first(const uint2* p,
                                                  unsigned long long policy) {
#if __CUDA_ARCH__ >= 800
  uint2 v;
  asm volatile(
      "ld.global.L1::no_allocate.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
      : "=r"(v.x), "=r"(v.y)
      : "l"(p), "l"(policy));
  return v;
#else
  return load_readonly(p);
#endif
}

// One access of an input, in flavour kLoad (policy: evict_first_policy()'s,
// unused by the read-only load).
template <int kLoad, typename Access>
__device__ __forceinline__ Access load_input(const Access* p,
                                             unsigned long long policy) {
  if constexpr (kLoad == kLoadEvictFirst) {
    return load_evict_first(p, policy);
  } else {
    return load_readonly(p);
  }
}

// The op over the elements packed in one access of each input: the inputs
// come back updated where the op writes them, the outputs in `out`. The union
// is the CUDA idiom for viewing an access's registers as T.
template <typename Sig, typename T, typename Access>
__device__ __forceinline__ void apply_packed(
    Access (&x)[Sig::kInputs], Access (&out)[AtLeastOne<Sig::kOutputs>::value],
    const ScalarsOf<Sig, T>& s) {
  constexpr int kWidth = sizeof(Access) / sizeof(T);
  constexpr int kOut = AtLeastOne<Sig::kOutputs>::value;
  union Packed {
    Access raw;
    T v[kWidth];
  };
  Packed in[Sig::kInputs], r[kOut];
#pragma unroll
  for (int k = 0; k < Sig::kInputs; ++k) in[k].raw = x[k];
#pragma unroll
  for (int j = 0; j < kWidth; ++j) {
    T v[Sig::kInputs], o[kOut];
#pragma unroll
    for (int k = 0; k < Sig::kInputs; ++k) v[k] = in[k].v[j];
    apply_element<Sig>(v, o, s);
#pragma unroll
    for (int k = 0; k < Sig::kInputs; ++k) in[k].v[j] = v[k];
#pragma unroll
    for (int m = 0; m < kOut; ++m) r[m].v[j] = o[m];
  }
#pragma unroll
  for (int k = 0; k < Sig::kInputs; ++k)
    if (Sig::kMutated & (1u << k)) x[k] = in[k].raw;
#pragma unroll
  for (int m = 0; m < Sig::kOutputs; ++m) out[m] = r[m].raw;
}

// kPerThread accesses of one thread: all loads, then the op and the stores.
// kChecked: guard each access against n_acc (the grid's last block only). An
// input the op updates in place is loaded plainly (the read-only path is for
// data no thread writes).
template <typename Sig, typename T, typename Access, int kBlock, int kPerThread,
          int kLoad, bool kChecked>
__device__ __forceinline__ void vector_accesses(const PointersOf<Sig, T>& p,
                                                const ScalarsOf<Sig, T>& s,
                                                long long base, long long n_acc,
                                                unsigned long long policy) {
  constexpr int N = Sig::kInputs;
  Access x[kPerThread][N];
#pragma unroll
  for (int a = 0; a < kPerThread; ++a) {
    const long long i = base + (long long)a * kBlock;
    if (!kChecked || i < n_acc) {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const Access* from = reinterpret_cast<const Access*>(p.in[k]) + i;
        x[a][k] = (Sig::kMutated & (1u << k)) ? *from
                                              : load_input<kLoad>(from, policy);
      }
    }
  }
#pragma unroll
  for (int a = 0; a < kPerThread; ++a) {
    const long long i = base + (long long)a * kBlock;
    if (!kChecked || i < n_acc) {
      Access out[AtLeastOne<Sig::kOutputs>::value];
      apply_packed<Sig, T>(x[a], out, s);
#pragma unroll
      for (int k = 0; k < N; ++k)
        if (Sig::kMutated & (1u << k))
          reinterpret_cast<Access*>(p.in[k])[i] = x[a][k];
#pragma unroll
      for (int m = 0; m < Sig::kOutputs; ++m)
        reinterpret_cast<Access*>(p.out[m])[i] = out[m];
    }
  }
}

// The vectorized kernel. Each thread moves kPerThread accesses of kBytes from
// each input; thread t of a block takes accesses t, t + kBlock, ... (coalesced)
// and issues all its loads before any store. Full blocks take an unguarded,
// straight-line path: with a guard per access, ptxas sinks the loads of 1- and
// 2-byte types next to their stores, leaving one access in flight per thread.
// The last n % width elements (fewer than one access) are done one by one by
// the first threads of the grid, with plain loads in every flavour kLoad. The
// launcher guarantees every pointer is kBytes-aligned.
template <typename Sig, typename T, int kBytes, int kBlock, int kPerThread,
          int kLoad>
__global__ void __launch_bounds__(kBlock)
    elementwise_vectorized(PointersOf<Sig, T> p, ScalarsOf<Sig, T> s,
                           long long n) {
  typedef typename AccessOf<kBytes>::type Access;
  const unsigned long long policy =
      kLoad == kLoadEvictFirst ? evict_first_policy() : 0;
  constexpr int kWidth = kBytes / sizeof(T);  // elements per access
  const long long n_acc = n / kWidth;
  const long long first = (long long)blockIdx.x * (kBlock * kPerThread);
  if (first + kBlock * kPerThread <= n_acc) {
    vector_accesses<Sig, T, Access, kBlock, kPerThread, kLoad, false>(
        p, s, first + threadIdx.x, n_acc, policy);
  } else {
    vector_accesses<Sig, T, Access, kBlock, kPerThread, kLoad, true>(
        p, s, first + threadIdx.x, n_acc, policy);
  }
  const long long tail = n - n_acc * kWidth;
  const long long t = (long long)blockIdx.x * kBlock + threadIdx.x;
  if (t < tail) {
    const long long j = n_acc * kWidth + t;
    T v[Sig::kInputs], o[AtLeastOne<Sig::kOutputs>::value];
#pragma unroll
    for (int k = 0; k < Sig::kInputs; ++k) v[k] = p.in[k][j];
    apply_element<Sig>(v, o, s);
    store_element<Sig>(p, v, o, j, nullptr);
  }
}

}  // namespace cee
