// The types of the generated op table (cee_generated.h, written by
// buildtools/codegen.py from ops/*/ops.toml and pyproject.toml): what the
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

// The kernel slots of an elementwise op and dtype (buildtools/codegen.py):
// the simple kernel, the strided one, then vector shape i at
// kFirstVectorSlot + i.
enum { kSimpleSlot = 0, kStridedSlot = 1, kFirstVectorSlot = 2 };

// One kernel instance of an op: its template's name (the op's own, in its
// kernels.cuh, or one of the core's elementwise templates), the dtype (the
// core's index), the values of the template's parameters after the dtype as
// ops.toml lists them (a bool as 0 or 1), and the launcher's kernel index.
struct KernelInstance {
  const char* name;
  int dtype;
  int num_values;
  int values[4];
  int index;
};

// What the core's elementwise host function reads of an op whose kernels are
// the core's over its rule (csrc/elementwise_host.h).
struct ElementwiseInfo {
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
  // slots[slot * CEE_NUM_DTYPES + dtype]: the launcher's kernel index, -1
  // where the op has no such dtype or shape.
  const int* slots;
};

// One declared op, whoever wrote its host function.
struct OpInfo {
  const char* name;      // "my_add"
  const char* qualname;  // "cuda_ext_example.my_add": how errors name it
  unsigned dtypes;       // bit d: the core's dtype d
  const KernelInstance* kernels;
  int num_kernels;
  const ElementwiseInfo* elementwise;  // nullptr: the op has its own host.h
};

}  // namespace cee
