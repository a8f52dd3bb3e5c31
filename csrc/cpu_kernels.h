// The CPU kernel of every elementwise op: its rule (ops/*/rule.h) over the
// elements, in torch's thread pool, on the same host types as the harness
// (host_float16.h: one rounding of the 16-bit floats).
#pragma once
#include <torch/csrc/stable/ops.h>

#include "element_math.h"
#include "host_float16.h"

namespace cee {

constexpr int64_t kCpuGrainSize = 1 << 16;

typedef void (*CpuKernel)(const void* const* in, void* out, int64_t n);

// The op's rule over n elements, in torch's thread pool (vectorizing is the
// compiler's job here). The callback runs inside that pool: it must never
// throw.
template <typename Rule, typename T, int N>
void cpu_elementwise(const void* const* in, void* out, int64_t n) {
  const T* p[N];
  for (int k = 0; k < N; ++k) p[k] = static_cast<const T*>(in[k]);
  T* to = static_cast<T*>(out);
  torch::stable::parallel_for(0, n, kCpuGrainSize,
                              [=](int64_t begin, int64_t end) noexcept {
                                for (int64_t i = begin; i < end; ++i) {
                                  T v[N];
                                  for (int k = 0; k < N; ++k) v[k] = p[k][i];
                                  to[i] = cee::apply_rule<Rule>(v);
                                }
                              });
}

template <typename Rule, int N>
CpuKernel cpu_kernel(int dtype) {
  switch (dtype) {
#define CEE_CPU_CASE(id, device_type, size, scalar_type, name) \
  case CEE_DTYPE_##id: return &cpu_elementwise<Rule, HostType_##name, N>;
    CEE_FOR_EACH_DTYPE(CEE_CPU_CASE)
#undef CEE_CPU_CASE
  }
  return nullptr;
}

}  // namespace cee
