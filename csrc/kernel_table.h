// The one table of the dtypes and kernel shapes. Plain C macros, read by the
// host code (ops.cpp: torch dtype checks and CPU kernels; launcher.cpp), and by
// buildtools/device_code.py, which turns every (shape, dtype) pair into an
// NVRTC name expression, e.g.
//   cee::add_vectorized_kernel<float, 16, 256, 4>
// records the lowered (mangled) name NVRTC gives it for the launcher, and
// writes the dtype names into the build record
// (cuda_ext_example.SUPPORTED_DTYPES).
//
// Every kernel takes the same parameters, in this order (the launcher passes
// them to cuLaunchKernel as an array of pointers):
//   const T* a, const T* b, T* out, long long n
#pragma once

// X(id, device type as NVRTC spells it, size in bytes, torch ScalarType,
//   torch's Python name)
#define CEE_FOR_EACH_DTYPE(X)                       \
  X(FLOAT16, __half, 2, Half, float16)              \
  X(BFLOAT16, __nv_bfloat16, 2, BFloat16, bfloat16) \
  X(FLOAT32, float, 4, Float, float32)              \
  X(FLOAT64, double, 8, Double, float64)            \
  X(INT8, signed char, 1, Char, int8)               \
  X(INT16, short, 2, Short, int16)                  \
  X(INT32, int, 4, Int, int32)                      \
  X(INT64, long long, 8, Long, int64)               \
  X(UINT8, unsigned char, 1, Byte, uint8)

// X(id, bytes per access, threads per block, accesses per thread).
// 0 bytes per access: add_simple_kernel, one element per thread (my_add).
// Otherwise add_vectorized_kernel (my_fast_add); launcher.cpp picks the shape
// by size per tensor and alignment.
#define CEE_FOR_EACH_SHAPE(X) \
  X(SIMPLE, 0, 256, 1)        \
  X(VEC16, 16, 256, 1)        \
  X(VEC16X4, 16, 256, 4)      \
  X(VEC8, 8, 512, 1)

#define CEE_ENUM_ENTRY(id, ...) CEE_##id,
typedef enum { CEE_FOR_EACH_DTYPE(CEE_ENUM_ENTRY) CEE_NUM_DTYPES } cee_dtype;
#define CEE_SHAPE_ENTRY(id, ...) CEE_SHAPE_##id,
typedef enum { CEE_FOR_EACH_SHAPE(CEE_SHAPE_ENTRY) CEE_NUM_SHAPES } cee_shape;
