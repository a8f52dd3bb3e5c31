// Host side of the elementwise core, shared by the torch ops (csrc/ops.cpp) and
// the harness (csrc/harness.cpp): picks the kernel instance and launch shape of
// an op for a call, and launches it through the launcher's C API. No torch
// here.
#pragma once

#include <stdint.h>
#include <string.h>

#include <atomic>

#include "cee_generated.h"
#include "launcher.h"
#include "op_table.h"

namespace cee {

inline bool aligned_to(const void* p, int64_t bytes) {
  return ((uintptr_t)p % (uintptr_t)bytes) == 0;
}

// The launch-shape table of a GPU, by the name its driver reports: its own
// table if one was measured (tuning/launch_shapes.toml), else the default (0).
inline int launch_table_for(const char* gpu_name) {
  for (int t = 1; gpu_name && t < CEE_NUM_LAUNCH_TABLES; ++t)
    if (strcmp(cee_launch_tables[t].gpu, gpu_name) == 0) return t;
  return 0;
}

static_assert(CEE_MAX_INPUTS == 3 && CEE_NUM_ELEMENT_SIZES == 4,
              "LaunchTable.rules (op_table.h) is sized for these");

// The index of an element size in cee_element_bytes: the largest listed up to
// it (every dtype of the core has a listed size).
inline int element_size_index(int element_bytes) {
  int i = 0;
  while (i + 1 < CEE_NUM_ELEMENT_SIZES &&
         cee_element_bytes[i + 1] <= element_bytes)
    ++i;
  return i;
}

// The vector shape (index into cee_vector_shapes) a table gives an op of
// `inputs` inputs of `element_bytes`-byte elements whose tensors are `bytes`
// bytes each: the op's own list if the table has one (`own`: OpInfo's
// own_shapes, -1 for none), else the inputs' list. A pure function of the
// table and the sizes: tests call it through the Python module with no GPU.
inline int choose_vector_shape(int table, int own, int inputs,
                               int element_bytes, int64_t bytes) {
  const LaunchTable& t = cee_launch_tables[table];
  const int element = element_size_index(element_bytes);
  const ShapeRule* rule =
      own >= 0 && t.op_rules ? t.op_rules[own * CEE_NUM_ELEMENT_SIZES + element]
                             : nullptr;
  if (!rule) rule = t.rules[inputs - 1][element];
  while (rule->up_to_bytes >= 0 && bytes > rule->up_to_bytes) ++rule;
  return rule->shape;
}

// The table of `device`, looked up by name once per device (the launcher
// caches the name; here the index, 1 + table, 0 until known).
inline int launch_table_of_device(int device) {
  static std::atomic<int> known[CEE_MAX_DEVICES];
  if (device < 0 || device >= CEE_MAX_DEVICES) return 0;
  int t = known[device].load(std::memory_order_relaxed);
  if (t == 0) {
    t = 1 + launch_table_for(cee_device_name(device));
    known[device].store(t, std::memory_order_relaxed);
  }
  return t - 1;
}

// A shape forced for every vectorized launch of the process (-1: none), for
// the tuning command and the tests that run every compiled shape; set through
// cee_force_launch_shape (launch_shape_hooks.cpp).
inline std::atomic<int>& forced_vector_shape() {
  static std::atomic<int> forced{-1};
  return forced;
}

// The kernel's parameters for one call, built by the caller (the types depend
// on the op's signature and dtype): Pointers<T, N, M>, its Scalars, and the
// Strided<N> geometry, or nullptr for same-shape contiguous tensors.
struct LaunchArgs {
  void* pointers;
  void* scalars;
  void* strided;
};

// The instance slot of a call: strided where the call needs it; else the
// device's table's vector shape for this op and size, if every pointer is
// aligned to its access; otherwise (an offset slice such as x[1:]) the simple
// kernel, correct but not vectorized. `data`: the inputs' then the outputs'.
inline int pick_slot(const ElementwiseInfo& op, int dtype,
                     const void* const* data, bool strided, int64_t n,
                     int device) {
  if (strided) return kStridedSlot;
  if (!op.vectorized) return kSimpleSlot;
  int shape = forced_vector_shape().load(std::memory_order_relaxed);
  // The tables were measured for one to three streams read per element.
  const int streams =
      op.num_inputs < CEE_MAX_INPUTS ? op.num_inputs : CEE_MAX_INPUTS;
  if (shape < 0)
    shape = choose_vector_shape(launch_table_of_device(device), op.own_shapes,
                                streams, cee_dtype_sizes[dtype],
                                n * cee_dtype_sizes[dtype]);
  const int access = cee_vector_shapes[shape].access_bytes;
  // A forced shape no table gives this op has no instance: the simple kernel.
  bool ok = op.slots[(kFirstVectorSlot + shape) * CEE_NUM_DTYPES + dtype] >= 0;
  for (int k = 0; k < op.num_inputs + op.num_outputs; ++k)
    ok = ok && aligned_to(data[k], access);
  return ok ? kFirstVectorSlot + shape : kSimpleSlot;
}

// Blocks and threads for a slot: one thread per element, or per access; the
// vectorized kernel's tail (< one access) is done by the first threads, so at
// least one block.
inline void launch_shape(int slot, int dtype, int64_t n, unsigned* grid,
                         unsigned* block) {
  int64_t width = 1, per_thread = 1, threads = CEE_SIMPLE_BLOCK;
  if (slot >= kFirstVectorSlot) {
    const VectorShape& shape = cee_vector_shapes[slot - kFirstVectorSlot];
    width = shape.access_bytes / cee_dtype_sizes[dtype];
    per_thread = shape.per_thread;
    threads = shape.block;
  }
  const int64_t per_block = threads * per_thread;
  const int64_t blocks = (n / width + per_block - 1) / per_block;
  *grid = (unsigned)(blocks > 0 ? blocks : 1);
  *block = (unsigned)threads;
}

// The op over n elements on `device`, `stream`. Returns 0, or the launcher's
// error (message, naming op.qualname, in err).
inline int launch_elementwise(const OpInfo& op, int dtype,
                              const void* const* data, const LaunchArgs& args,
                              int64_t n, int device, void* stream, char* err,
                              size_t err_len) {
  if (n == 0) return 0;
  const ElementwiseInfo& e = *op.elementwise;
  const int slot =
      pick_slot(e, dtype, data, args.strided != nullptr, n, device);
  unsigned grid, block;
  launch_shape(slot, dtype, n, &grid, &block);
  long long count = n;
  void* with_geometry[] = {args.pointers, args.scalars, args.strided, &count};
  void* contiguous[] = {args.pointers, args.scalars, &count};
  return cee_launch(e.slots[slot * CEE_NUM_DTYPES + dtype], grid, block, 0,
                    args.strided ? with_geometry : contiguous, device, stream,
                    op.qualname, err, err_len);
}

}  // namespace cee
