// a + b, as torch.add computes it. The core calls apply in cee::Compute<T>:
// float for the 16-bit floats (rounded back to nearest even), unsigned for the
// signed integers (so overflow wraps, as torch's does, without C++'s undefined
// behaviour).
#pragma once
#include "element_math.h"

struct Add {
  template <typename C>
  CEE_HOST_DEVICE static C apply(C a, C b) {
    return a + b;
  }
};
