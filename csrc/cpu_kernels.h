// The CPU kernel of every elementwise op: its rule (ops/*/rule.h, through its
// generated signature) over the elements, in torch's thread pool, on the same
// host types as the harness (host_float16.h: one rounding of the 16-bit
// floats), with the same parameters as the CUDA kernels
// (elementwise_args.h).
#pragma once
#include "elementwise_args.h"
#include "host_float16.h"
#include "torch_versions.h"

namespace cee {

constexpr int64_t kCpuGrainSize = 1 << 16;

// pointers: Pointers<T, N, M>; scalars: the signature's Scalars<C>; strided:
// Strided<N>, or nullptr for same-shape contiguous tensors.
typedef void (*CpuKernel)(const void* pointers, const void* scalars,
                          const void* strided, int64_t n);

// The op over n elements, in torch's thread pool (vectorizing is the
// compiler's job here). The callback runs inside that pool: it must never
// throw.
template <typename Sig, typename T>
void cpu_elementwise(const void* pointers, const void* scalars,
                     const void* strided, int64_t n) {
  static constexpr int N = Sig::kInputs;
  typedef Pointers<T, N, Sig::kOutputs> P;
  typedef typename Sig::template Scalars<typename Compute<T>::type> S;
  const P p = *static_cast<const P*>(pointers);
  const S s = *static_cast<const S*>(scalars);
  const Strided<N>* g = static_cast<const Strided<N>*>(strided);
  // One element at output index i, its inputs at offsets off.
  auto element = [&p, &s](int64_t i, const long long (&off)[N]) {
    T v[N], o[AtLeastOne<Sig::kOutputs>::value];
    for (int k = 0; k < N; ++k) v[k] = p.in[k][off[k]];
    apply_element<Sig>(v, o, s);
    for (int k = 0; k < N; ++k)
      if (Sig::kMutated & (1u << k)) p.in[k][off[k]] = v[k];
    for (int j = 0; j < Sig::kOutputs; ++j) p.out[j][i] = o[j];
  };
  cee::parallel_for(0, n, kCpuGrainSize,
                    [=](int64_t begin, int64_t end) noexcept {
                      long long off[N];
                      for (int64_t i = begin; i < end; ++i) {
                        if (g) {
                          g->offsets(i, off);
                        } else {
                          for (int k = 0; k < N; ++k) off[k] = i;
                        }
                        element(i, off);
                      }
                    });
}

}  // namespace cee
