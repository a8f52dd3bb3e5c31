// GELU with the tanh approximation, as torch.nn.functional.gelu(x,
// approximate="tanh") computes it on CUDA: 0.5 x (1 + tanh(sqrt(2/pi) (x +
// 0.044715 x^3))), the inner sum one fused multiply-add as nvcc contracts it
// there. tanh is the C library's on the host and CUDA's on the GPU, so the
// declaration states a tolerance (torch's CPU kernel uses its own vectorized
// tanh).
#pragma once
#include "element_math.h"

struct GeluTanh {
  template <typename C>
  CEE_HOST_DEVICE static C apply(C x) {
    const C beta = C(0.7978845608028654);  // sqrt(2 / pi)
    const C kappa = C(0.044715);
    const C inner = beta * cee::fma(kappa, x * x * x, x);
    return C(0.5) * x * (C(1) + cee::tanh(inner));
  }
};
