// C interface of the CUDA launcher (csrc/launcher.cpp) to the torch ops
// (csrc/ops.cpp) and to the standalone harness (csrc/harness.cpp). Only plain C
// types cross it. The launcher talks to the NVIDIA driver API alone (no CUDA
// runtime): libcuda.so.1 is opened at the first CUDA call, never at import.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernel_table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  CEE_KERNEL_SIMPLE = 0,      // my_add: one element per thread
  CEE_KERNEL_VECTORIZED = 1,  // my_fast_add: 16-byte vectors (8-byte > 64 MiB)
} cee_kernel;

// out[i] = a[i] + b[i] for i in [0, n), on `device`, launched on `stream` (a
// CUstream of that device's primary context; NULL is the legacy default
// stream). Returns 0 on success. On failure returns the CUresult (or -1 when
// the driver could not be used at all) and writes a readable message, naming
// `op`, into err[0..err_len).
int cee_cuda_add(cee_kernel kernel, cee_dtype dtype, const void* a,
                 const void* b, void* out, int64_t n, int device, void* stream,
                 const char* op, char* err, size_t err_len);

// A driver entry point as cuGetProcAddress returns it for CUDA 12.0 behaviour
// (the harness uses it for memory and copies), or NULL with a message in err.
void* cee_cuda_entry_point(const char* name, char* err, size_t err_len);

// The device code this binary carries, e.g.
// "SASS sm_75 sm_80 ...; PTX compute_120 (NVRTC 12.9)".
const char* cee_cuda_arch_list(void);

#ifdef __cplusplus
}
#endif
