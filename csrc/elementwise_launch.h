// Host side of the elementwise core, shared by the torch ops (csrc/ops.cpp) and
// the harness (csrc/harness.cpp): picks the kernel instance and launch shape of
// an op for a call, and launches it through the launcher's C API. No torch
// here.
#pragma once

#include <stdint.h>

#include "cee_generated.h"
#include "launcher.h"
#include "op_table.h"

namespace cee {

inline bool aligned_to(const void* p, int64_t bytes) {
  return ((uintptr_t)p % (uintptr_t)bytes) == 0;
}

// The instance slot of a call (0: the simple kernel; 1 + i: vector shape i):
// the first shape whose size limit fits the tensor's bytes, if every pointer is
// aligned to its access; otherwise (an offset slice such as x[1:]) the simple
// kernel, correct but not vectorized.
inline int pick_slot(const OpInfo& op, int dtype, const void* const* in,
                     const void* out, int64_t n) {
  if (!op.vectorized) return 0;
  const int64_t bytes = n * cee_dtype_sizes[dtype];
  for (int i = 0; i < CEE_NUM_VECTOR_SHAPES; ++i) {
    const VectorShape& shape = cee_vector_shapes[i];
    if (shape.up_to_bytes >= 0 && bytes > shape.up_to_bytes) continue;
    bool ok = aligned_to(out, shape.access_bytes);
    for (int k = 0; k < op.arity; ++k)
      ok = ok && aligned_to(in[k], shape.access_bytes);
    return ok ? 1 + i : 0;
  }
  return 0;
}

// Blocks and threads for a slot: one thread per element, or per access; the
// vectorized kernel's tail (< one access) is done by the first threads, so at
// least one block.
inline void launch_shape(int slot, int dtype, int64_t n, unsigned* grid,
                         unsigned* block) {
  int64_t width = 1, per_thread = 1, threads = CEE_SIMPLE_BLOCK;
  if (slot > 0) {
    const VectorShape& shape = cee_vector_shapes[slot - 1];
    width = shape.access_bytes / cee_dtype_sizes[dtype];
    per_thread = shape.per_thread;
    threads = shape.block;
  }
  const int64_t per_block = threads * per_thread;
  const int64_t blocks = (n / width + per_block - 1) / per_block;
  *grid = (unsigned)(blocks > 0 ? blocks : 1);
  *block = (unsigned)threads;
}

// out[i] = rule(in[0][i], ...) for i in [0, n) on `device`, `stream`. Returns
// 0, or the launcher's error (message, naming op.qualname, in err).
inline int launch_elementwise(const OpInfo& op, int dtype,
                              const void* const* in, void* out, int64_t n,
                              int device, void* stream, char* err,
                              size_t err_len) {
  if (n == 0) return 0;
  const int slot = pick_slot(op, dtype, in, out, n);
  unsigned grid, block;
  launch_shape(slot, dtype, n, &grid, &block);
  // The kernels' parameters: Inputs<T, N> (the pointers, by value), T* out,
  // long long n.
  KernelInputs inputs = {};
  for (int k = 0; k < op.arity; ++k) inputs.p[k] = in[k];
  long long count = n;
  void* args[] = {&inputs, &out, &count};
  return cee_launch(op.kernels[slot * CEE_NUM_DTYPES + dtype], grid, block,
                    args, device, stream, op.qualname, err, err_len);
}

}  // namespace cee
