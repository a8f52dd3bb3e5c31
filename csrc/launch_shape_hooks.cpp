// The launch-shape choice (elementwise_launch.h), which has no torch op, as
// plain C functions that Python calls through ctypes
// (src/cuda_ext_example/_launch_shapes.py): what tests check with no GPU, and
// what the tuning command forces; and which libraries of device code (one per
// op and dtype) the launcher has loaded, for the cold-start tests. Only C types
// cross; nothing here, nor
// anywhere in the library, uses the CPython API: torch.ops.load_library loads
// it, its static initializers register the ops (ops.cpp), and the wheel is
// py3-none. csrc/exports.map lists these functions: the library exports
// nothing else.

// clang-format off: first, the op table names ops by it
#include "op_namespace.h"
// clang-format on
#include <stdio.h>
#include <string.h>

#include "cee_generated.h"
#include "elementwise_launch.h"
#include "host_float16.h"
#include "launcher.h"

#ifdef _WIN32
#define CEE_EXPORT extern "C" __declspec(dllexport)
#else
#define CEE_EXPORT extern "C" __attribute__((visibility("default")))
#endif

// The number of compiled vector shapes.
CEE_EXPORT int cee_vector_shape_count(void) { return CEE_NUM_VECTOR_SHAPES; }

// Shape `index`: bytes per access, block, accesses per thread and the load
// flavour ("default" or "evict-first": tuning/launch_shapes.toml's names).
// Returns 0, or -1 for an index out of range.
CEE_EXPORT int cee_vector_shape(int index, int* access_bytes, int* block,
                                int* per_thread, const char** load) {
  if (index < 0 || index >= CEE_NUM_VECTOR_SHAPES) return -1;
  const cee::VectorShape& v = cee_vector_shapes[index];
  *access_bytes = v.access_bytes;
  *block = v.block;
  *per_thread = v.per_thread;
  *load = cee_load_names[v.load];
  return 0;
}

// The shape the launcher takes on GPU `gpu` (the driver's device name) for
// `inputs` tensors of `element_bytes` each and `bytes` per tensor, for op `op`
// (its name: its own lists of tuning/launch_shapes.toml, if it has any; "" or
// NULL, or an op without lists of its own: the lists by number of inputs): its
// index, with the name of the table it came from in *table; or -1 with a
// message in err for arguments out of range.
CEE_EXPORT int cee_launch_shape(const char* gpu, int inputs, int element_bytes,
                                long long bytes, const char* op,
                                const char** table, char* err, size_t err_len) {
  if (inputs < 1 || inputs > CEE_MAX_INPUTS || element_bytes < 1 || bytes < 0) {
    snprintf(err, err_len,
             "launch_shape: inputs must be 1..%d, element_bytes >= 1 and "
             "bytes >= 0, got %d, %d, %lld",
             CEE_MAX_INPUTS, inputs, element_bytes, bytes);
    return -1;
  }
  int own = -1;
  for (int i = 0; op && i < CEE_NUM_OWN_SHAPE_OPS; ++i)
    if (strcmp(cee_own_shape_ops[i], op) == 0) own = i;
  const int t = cee::launch_table_for(gpu);
  *table = cee_launch_tables[t].gpu;
  return cee::choose_vector_shape(t, own, inputs, element_bytes, bytes);
}

// Every vectorized launch of this process takes vector shape `index` (where
// its pointers are aligned); -1: the tables again. Returns 0, or -1 with a
// message in err for an index that is no compiled shape.
CEE_EXPORT int cee_force_launch_shape(int index, char* err, size_t err_len) {
  if (index < -1 || index >= CEE_NUM_VECTOR_SHAPES) {
    snprintf(err, err_len,
             "force_launch_shape: %d is not a compiled shape (0..%d, or -1 "
             "for the per-GPU tables)",
             index, CEE_NUM_VECTOR_SHAPES - 1);
    return -1;
  }
  cee::forced_vector_shape().store(index);
  return 0;
}

// The number of device-code libraries (one per op and dtype, each its own
// fatbin, loaded at the first launch of one of its kernels).
CEE_EXPORT int cee_device_library_count(void) { return cee_num_libraries(); }

// Library `index`: its name (op_dtype) in *name, and in *loaded whether this
// process has loaded it (1) or not (0). Returns 0, or -1 for an index out of
// range.
CEE_EXPORT int cee_device_library(int index, const char** name, int* loaded) {
  if (index < 0 || index >= cee_num_libraries()) return -1;
  *name = cee_library_name(index);
  *loaded = cee_library_loaded(index);
  return 0;
}
