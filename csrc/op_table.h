// The types of the generated op table (cee_generated.h, written by
// buildtools/device_code.py from ops/*/ops.toml and pyproject.toml): what the
// host code knows of each op.
#pragma once

#include <stdint.h>

namespace cee {

// A compiled launch shape of the vectorized kernel
// (tuning/launch_shapes.toml): bytes per access, threads per block, accesses
// per thread, and the inputs' load flavour (an index into cee_load_names:
// "default", "evict-first"), which the kernel instance itself carries; here
// for _C.vector_shapes().
struct VectorShape {
  int access_bytes, block, per_thread, load;
};

// One rule of a GPU's table: tensors of up to `up_to_bytes` bytes each (-1:
// any size) take cee_vector_shapes[shape].
struct ShapeRule {
  int64_t up_to_bytes;
  int shape;
};

// The launch-shape table of one GPU (by the driver's device name; the first
// table is the default): rules[inputs - 1][element size: 1, 2, 4, 8 bytes],
// the first fitting rule wins.
struct LaunchTable {
  const char* gpu;
  const ShapeRule* rules[3][4];
};

// What the launcher passes as the kernels' first parameter, Inputs<T, N>: the
// input pointers (N <= 3), by value.
struct KernelInputs {
  const void* p[3];
};

// One declared op.
struct OpInfo {
  const char* name;           // "my_add"
  const char* qualname;       // "cuda_ext_example.my_add": how errors name it
  const char* const* inputs;  // the schema's names of the inputs: {"a", "b"}
  int arity;
  bool vectorized;
  // kernels[slot * CEE_NUM_DTYPES + dtype]: the launcher's kernel index, -1
  // where the op has no such dtype. Slot 0: the simple kernel; 1 + i: vector
  // shape i.
  const int* kernels;
};

}  // namespace cee
