// GELU with the tanh approximation, torch.nn.functional.gelu(x,
// approximate="tanh"): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// written as its equal x / (1 + exp(-2u)). Why: in 16-bit dtypes the op is
// bound by arithmetic, not memory, and tanh costs two paths and a branch per
// element (NVRTC 12.0's sm_90 code) where exp and a reciprocal cost a few
// instructions; the form is also exact where 1 + tanh(u) cancels (x << 0). It
// differs from torch's formula in the last bits, so the declaration states a
// tolerance.
#pragma once
#include "element_math.h"

struct GeluTanh {
  template <typename C>
  CEE_HOST_DEVICE static C apply(C x) {
    const C beta = C(0.7978845608028654);  // sqrt(2 / pi)
    const C kappa = C(0.044715);
    const C inner = beta * cee::fma(kappa, x * x * x, x);
    return cee::fast_divide(x, C(1) + cee::exp(C(-2) * inner));
  }
};
