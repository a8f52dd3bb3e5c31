// x if x > 0, else x * negative_slope: torch.nn.functional.leaky_relu, bit for
// bit (one comparison and one multiplication, in float for the 16-bit floats,
// on the CPU and the GPU alike). The scalar comes in the compute type C.
#pragma once
#include "element_math.h"

struct LeakyRelu {
  template <typename C>
  CEE_HOST_DEVICE static C apply(C x, C negative_slope) {
    return x > C(0) ? x : x * negative_slope;
  }
};
