// x * x, as torch.square computes it (in cee::Compute<T>: integers wrap like
// torch's).
#pragma once
#include "element_math.h"

struct Square {
  template <typename C>
  CEE_HOST_DEVICE static C apply(C x) {
    return x * x;
  }
};
