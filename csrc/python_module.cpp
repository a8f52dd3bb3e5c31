// The CPython module `_C`: importing it loads this library, whose static
// initializers register the ops with torch (ops.cpp). Its functions expose the
// launch-shape choice (elementwise_launch.h), which has no torch op: what tests
// check with no GPU, and what the tuning command forces; and which libraries of
// device code (one per op and dtype) the launcher has loaded, for the
// cold-start tests. Py_LIMITED_API: the module uses only the stable Python ABI,
// so the wheel is abi3.
#ifndef Py_LIMITED_API
#error "build with -DPy_LIMITED_API=0x030A0000 (see buildtools/build_ext.py)"
#endif
#include <Python.h>

// clang-format off: first, the op table names ops by it
#include "op_namespace.h"
// clang-format on
#include "cee_generated.h"
#include "elementwise_launch.h"
#include "host_float16.h"

namespace {

// vector_shapes() -> [(access bytes, block, accesses per thread, load), ...],
// load: "default" or "evict-first" (tuning/launch_shapes.toml's names)
PyObject* py_vector_shapes(PyObject*, PyObject*) {
  PyObject* list = PyList_New(CEE_NUM_VECTOR_SHAPES);
  for (int i = 0; list && i < CEE_NUM_VECTOR_SHAPES; ++i) {
    const cee::VectorShape& v = cee_vector_shapes[i];
    PyObject* item = Py_BuildValue("(iiis)", v.access_bytes, v.block,
                                   v.per_thread, cee_load_names[v.load]);
    if (!item) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SetItem(list, i, item);
  }
  return list;
}

// launch_shape(gpu_name, inputs, element_bytes, bytes_per_tensor[, op])
//   -> (table, shape index); op: an op's name, for its own lists if any
PyObject* py_launch_shape(PyObject*, PyObject* args) {
  const char* gpu = nullptr;
  const char* op = "";
  int inputs = 0, element_bytes = 0;
  long long bytes = 0;
  if (!PyArg_ParseTuple(args, "siiL|s", &gpu, &inputs, &element_bytes, &bytes,
                        &op))
    return nullptr;
  int own = -1;
  for (int i = 0; i < CEE_NUM_OWN_SHAPE_OPS; ++i)
    if (strcmp(cee_own_shape_ops[i], op) == 0) own = i;
  if (inputs < 1 || inputs > CEE_MAX_INPUTS || element_bytes < 1 || bytes < 0) {
    PyErr_Format(PyExc_ValueError,
                 "launch_shape: inputs must be 1..%d, element_bytes >= 1 and "
                 "bytes >= 0, got %d, %d, %lld",
                 CEE_MAX_INPUTS, inputs, element_bytes, bytes);
    return nullptr;
  }
  const int table = cee::launch_table_for(gpu);
  return Py_BuildValue(
      "(si)", cee_launch_tables[table].gpu,
      cee::choose_vector_shape(table, own, inputs, element_bytes, bytes));
}

// force_launch_shape(index): every vectorized launch of this process takes
// vector shape `index` (where its pointers are aligned); -1: the tables again.
PyObject* py_force_launch_shape(PyObject*, PyObject* args) {
  int index = -1;
  if (!PyArg_ParseTuple(args, "i", &index)) return nullptr;
  if (index < -1 || index >= CEE_NUM_VECTOR_SHAPES) {
    PyErr_Format(PyExc_ValueError,
                 "force_launch_shape: %d is not a compiled shape (0..%d, or -1 "
                 "for the per-GPU tables)",
                 index, CEE_NUM_VECTOR_SHAPES - 1);
    return nullptr;
  }
  cee::forced_vector_shape().store(index);
  Py_RETURN_NONE;
}

// libraries([loaded_only]) -> [name, ...]: the device-code libraries (one per
// op and dtype), or only those this process has loaded.
PyObject* py_libraries(PyObject*, PyObject* args) {
  int loaded_only = 0;
  if (!PyArg_ParseTuple(args, "|p", &loaded_only)) return nullptr;
  int chosen[CEE_NUM_LIBRARIES], count = 0;
  for (int i = 0; i < cee_num_libraries(); ++i)
    if (!loaded_only || cee_library_loaded(i)) chosen[count++] = i;
  PyObject* list = PyList_New(count);
  for (int k = 0; list && k < count; ++k) {
    PyObject* name = Py_BuildValue("s", cee_library_name(chosen[k]));
    if (!name) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SetItem(list, k, name);
  }
  return list;
}

PyMethodDef cee_methods[] = {
    {"vector_shapes", py_vector_shapes, METH_NOARGS,
     "The compiled launch shapes: [(access bytes, block, per thread, load), "
     "...]"},
    {"launch_shape", py_launch_shape, METH_VARARGS,
     "launch_shape(gpu_name, inputs, element_bytes, bytes_per_tensor[, op]) "
     "-> (table, shape index): the shape the launcher takes"},
    {"force_launch_shape", py_force_launch_shape, METH_VARARGS,
     "force_launch_shape(index): every vectorized launch takes this shape "
     "(-1: the per-GPU tables); for tuning and tests"},
    {"libraries", py_libraries, METH_VARARGS,
     "libraries([loaded_only]) -> [name, ...]: the device-code libraries "
     "(one per op and dtype, each loaded at the first launch of one of its "
     "kernels), or those this process has loaded; for tests"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef cee_module = {
    PyModuleDef_HEAD_INIT,
    "_C",
    "cuda_ext_example's compiled ops (use torch.ops.cuda_ext_example.*) and "
    "their launch-shape choice",
    -1,
    cee_methods,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__C(void) {
  return PyModule_Create(&cee_module);
}
