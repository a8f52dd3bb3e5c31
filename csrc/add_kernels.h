// C interface between the host code (compiled by zig, sees torch headers) and
// the CUDA code (compiled by nvcc + gcc, sees no torch and no C++ standard
// library). Only plain C types cross this line, so the two halves can be built
// by different compilers and C++ runtimes.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Element types the kernels know. The host side maps torch dtypes onto these.
typedef enum {
  CEE_FLOAT16 = 0,
  CEE_BFLOAT16,
  CEE_FLOAT32,
  CEE_FLOAT64,
  CEE_INT8,
  CEE_INT16,
  CEE_INT32,
  CEE_INT64,
  CEE_UINT8,
} cee_dtype;

typedef enum {
  CEE_KERNEL_SIMPLE = 0,      // my_add: one element per thread
  CEE_KERNEL_VECTORIZED = 1,  // my_fast_add: 16-byte vectors (8-byte > 64 MiB)
} cee_kernel;

// out[i] = a[i] + b[i] for i in [0, n), on `device`, launched on `stream`
// (a cudaStream_t). Returns 0 on success. On failure returns the CUDA error
// code and writes a readable message (naming `op`) into err[0..err_len).
int cee_cuda_add(cee_kernel kernel, cee_dtype dtype, const void* a,
                 const void* b, void* out, int64_t n, int device, void* stream,
                 const char* op, char* err, size_t err_len);

// The architectures this binary carries device code for, e.g.
// "sass: sm_75 sm_80 ...; ptx: compute_120".
const char* cee_cuda_arch_list(void);

#ifdef __cplusplus
}
#endif
