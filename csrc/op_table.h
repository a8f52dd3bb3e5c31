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
// for cee_vector_shape (launch_shape_hooks.cpp).
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
// the first fitting rule wins; op_rules[own op * 4 + element size]: the list
// of an op measured on its own (OpInfo.own_shapes), nullptr where this table
// has none (the op takes its inputs-N list).
struct LaunchTable {
  const char* gpu;
  const ShapeRule* rules[3][4];
  const ShapeRule* const* op_rules;
};

// The kinds of scalar arguments (ScalarValues: real for float, integer for
// int and bool).
enum ScalarKind { kScalarFloat = 0, kScalarInt = 1, kScalarBool = 2 };

// The kernel slots of an op and dtype (buildtools/ops.py SIMPLE, STRIDED,
// FIRST_VECTOR): the simple kernel, the strided one, then vector shape i at
// kFirstVectorSlot + i.
enum { kSimpleSlot = 0, kStridedSlot = 1, kFirstVectorSlot = 2 };

// One declared op.
struct OpInfo {
  const char* name;           // "my_add"
  const char* qualname;       // "cuda_ext_example.my_add": how errors name it
  const char* const* inputs;  // the schema's names of the tensor inputs
  int num_inputs;
  int num_outputs;
  unsigned mutated;  // bit k: input k is updated in place
  const char* const* scalar_names;
  const int* scalar_kinds;  // ScalarKind of each
  int num_scalars;
  // What the harness passes for each scalar: its default, or the declared
  // example.
  const double* scalar_samples;
  // {rtol, atol} per dtype (torch.testing's), or nullptr: equal bit for bit.
  const double (*tolerance)[2];
  bool vectorized;
  // Its index among the ops with launch-shape lists of their own, or -1.
  int own_shapes;
  // kernels[slot * CEE_NUM_DTYPES + dtype]: the launcher's kernel index, -1
  // where the op has no such dtype.
  const int* kernels;
};

// One kernel instance of an op that is not elementwise (kind = "custom"):
// its template's name in kernels.cuh, the dtype (the core's index) and the
// values of the template's other parameters, as ops.toml lists them.
struct CustomKernel {
  const char* name;  // "rms_norm_forward"
  int dtype;
  int num_values;
  int values[4];
  int index;  // the launcher's kernel index
};

// One declared custom op: what its host function's launches look up.
struct CustomOpInfo {
  const char* name;
  const char* qualname;
  const CustomKernel* kernels;
  int num_kernels;
  unsigned dtypes;  // bit d: the core's dtype d
};

}  // namespace cee
