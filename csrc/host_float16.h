// The host's type for each dtype of the core, by torch's name, for the CPU
// kernels and the standalone harness alike. The 16-bit floats are torch's own
// header-only c10::Half and c10::BFloat16 (no libtorch needed): they compute in
// float and round back to nearest even exactly as torch's CPU kernels do, so
// the host rounds one way, everywhere. A dtype added to pyproject.toml fails to
// compile until it is given a type here.
#pragma once
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <cstdint>

#include "element_math.h"

namespace cee {
template <>
struct Compute<c10::Half> {
  typedef float type;
  static float in(c10::Half x) { return static_cast<float>(x); }
  static c10::Half out(float c) { return c10::Half(c); }
};
template <>
struct Compute<c10::BFloat16> {
  typedef float type;
  static float in(c10::BFloat16 x) { return static_cast<float>(x); }
  static c10::BFloat16 out(float c) { return c10::BFloat16(c); }
};
}  // namespace cee

typedef c10::Half HostType_float16;
typedef c10::BFloat16 HostType_bfloat16;
typedef float HostType_float32;
typedef double HostType_float64;
typedef int8_t HostType_int8;
typedef int16_t HostType_int16;
typedef int32_t HostType_int32;
typedef int64_t HostType_int64;
typedef uint8_t HostType_uint8;
