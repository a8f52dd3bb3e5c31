// Host side of every declared op: the torch registrations, the input checks,
// the CPU kernels and the CUDA dispatch, generated from the op table
// (cee_generated.h, written by the build from ops/*/ops.toml). Op-agnostic: a
// kernel author never edits this file. Uses only the LibTorch stable ABI
// (TORCH_TARGET_VERSION 2.10), so one binary loads on every torch >= 2.10.
//
// Built by zig (clang + its own static libc++) against glibc 2.17. Because our
// C++ runtime is not torch's, no C++ exception may cross into libtorch: every
// op is wrapped by `guarded`, which catches everything and hands the message to
// torch's C shim `aoti_torch_check`, which throws a c10::Error from inside
// libtorch. Python then sees an ordinary RuntimeError.
// The build passes Py_LIMITED_API (pyproject: python-limited-api) so the
// module uses only the stable Python ABI and can be tagged abi3.
#ifndef Py_LIMITED_API
#error "build with -DPy_LIMITED_API=0x030A0000 (see buildtools/build_ext.py)"
#endif
#include <Python.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <exception>
#include <string>

#include "element_math.h"

// torch's 16-bit floats compute in float and round to nearest even (their float
// constructors do), as torch's own kernels do: element_math.h's rule for them.
namespace cee {
template <>
struct Compute<c10::Half> {
  typedef float type;
  static float in(c10::Half x) { return static_cast<float>(x); }
  static c10::Half out(float c) { return c10::Half(c); }
};
template <>
struct Compute<c10::BFloat16> {
  typedef float type;
  static float in(c10::BFloat16 x) { return static_cast<float>(x); }
  static c10::BFloat16 out(float c) { return c10::BFloat16(c); }
};
}  // namespace cee

// The JIT build (cuda_ext_example/jit.py) registers the same code under another
// namespace, so it can be loaded next to the installed wheel.
#ifndef CEE_NAMESPACE
#define CEE_NAMESPACE cuda_ext_example
#endif
#define CEE_STR2(x) #x
#define CEE_STR(x) CEE_STR2(x)
#define CEE_NAMESPACE_STR CEE_STR(CEE_NAMESPACE)

#include "cee_generated.h"  // the op table; includes every op's rule.h
#include "elementwise_launch.h"

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Device;
using torch::stable::Tensor;

constexpr int64_t kCpuGrainSize = 1 << 16;

[[noreturn]] void fail(const std::string& message) {
  throw std::runtime_error(message);
}

// A failed torch call says so in these words: the Python side
// (cuda_ext_example/torch_errors.py) then replays that torch work with torch's
// public API, which raises torch's own exception (torch.OutOfMemoryError, ...).
constexpr const char* kTorchCallFailed = "torch call failed (";

// torch's own message for the last shim call that failed on this thread. The
// shim that hands it over arrived in torch 2.13; this build targets 2.10, so it
// is looked up at run time and is absent (nullptr) on torch 2.10 .. 2.12.
const char* torch_last_error() {
  using GetWhat = const char* (*)();
  static const GetWhat get_what = [] {
    void* lib = dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
    if (!lib) return GetWhat(nullptr);
    auto f = reinterpret_cast<GetWhat>(
        dlsym(lib, "torch_exception_get_what_without_backtrace"));
    dlclose(lib);  // RTLD_NOLOAD took a reference; torch still holds its own.
    return f;
  }();
  return get_what ? get_what() : nullptr;
}

[[noreturn]] void torch_call_failed(const char* what) {
  const char* words = torch_last_error();
  fail(std::string(kTorchCallFailed) + what + "): " +
       (words && *words
            ? words
            : "torch < 2.13 does not hand its message to extensions"));
}

// Runs one torch call of the stable ABI (which reports failure by throwing from
// our side of the boundary) and names what failed.
template <typename F>
auto torch_call(const char* what, F&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception&) {
    torch_call_failed(what);
  }
}

std::string device_name(const Device& device) {
  std::string name;
  switch (device.type()) {
    case torch::headeronly::DeviceType::CPU: return "cpu";
    case torch::headeronly::DeviceType::CUDA: name = "cuda"; break;
    case torch::headeronly::DeviceType::Meta: name = "meta"; break;
    default: name = "device type " + std::to_string((int)device.type());
  }
  if (device.has_index()) name += ":" + std::to_string(device.index());
  return name;
}

// Python's spelling (torch.int64, not c10's "Long"), as users wrote it.
std::string dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Half: return "torch.float16";
    case ScalarType::BFloat16: return "torch.bfloat16";
    case ScalarType::Float: return "torch.float32";
    case ScalarType::Double: return "torch.float64";
    case ScalarType::Char: return "torch.int8";
    case ScalarType::Short: return "torch.int16";
    case ScalarType::Int: return "torch.int32";
    case ScalarType::Long: return "torch.int64";
    case ScalarType::Byte: return "torch.uint8";
    case ScalarType::Bool: return "torch.bool";
    case ScalarType::ComplexFloat: return "torch.complex64";
    case ScalarType::ComplexDouble: return "torch.complex128";
    case ScalarType::ComplexHalf: return "torch.complex32";
    case ScalarType::UInt16: return "torch.uint16";
    case ScalarType::UInt32: return "torch.uint32";
    case ScalarType::UInt64: return "torch.uint64";
    case ScalarType::Float8_e4m3fn: return "torch.float8_e4m3fn";
    case ScalarType::Float8_e5m2: return "torch.float8_e5m2";
    default:
      return std::string("torch dtype ") + torch::headeronly::toString(t);
  }
}

std::string shape_string(const Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d) s += ", ";
    s += std::to_string(t.size(d));
  }
  return s + "]";
}

// The core's dtype index of a torch dtype (cee_generated.h), or -1.
int dtype_index(ScalarType t) {
  switch (t) {
#define CEE_DTYPE_CASE(id, device_type, size, scalar_type, name) \
  case ScalarType::scalar_type: return CEE_DTYPE_##id;
    CEE_FOR_EACH_DTYPE(CEE_DTYPE_CASE)
#undef CEE_DTYPE_CASE
    default: return -1;
  }
}

bool op_has_dtype(const cee::OpInfo& op, int dtype) {
  return dtype >= 0 &&
         op.kernels[dtype] >= 0;  // slot 0: every op has a simple kernel
}

std::string supported_dtypes(const cee::OpInfo& op) {
  static const char* const names[] = {
#define CEE_DTYPE_NAME(id, device_type, size, scalar_type, name) "torch." #name,
      CEE_FOR_EACH_DTYPE(CEE_DTYPE_NAME)
#undef CEE_DTYPE_NAME
  };
  std::string out;
  for (int d = 0; d < CEE_NUM_DTYPES; ++d)
    if (op_has_dtype(op, d))
      out += (out.empty() ? "" : ", ") + std::string(names[d]);
  return out;
}

bool same_shape(const Tensor& a, const Tensor& b) {
  if (a.dim() != b.dim()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) != b.size(d)) return false;
  return true;
}

// The one set of input rules for every op, said in the op's own input names.
// The fake kernels (cuda_ext_example/ops.py) state the same rules for
// torch.compile; a test compares the two messages case by case.
template <int N>
int check_inputs(const cee::OpInfo& op, const Tensor (&in)[N]) {
  const char* both = N == 2 ? "both" : "all";
  const std::string first = op.inputs[0];
  for (int k = 0; k < N; ++k)
    if (in[k].layout() != torch::headeronly::Layout::Strided)
      fail("expected dense (strided) tensors, got a sparse or other layout");
  for (int k = 1; k < N; ++k)
    if (!(in[k].device() == in[0].device()))
      fail(std::string("expected ") + both +
           " tensors on the same device, got " + first + " on " +
           device_name(in[0].device()) + " and " + op.inputs[k] + " on " +
           device_name(in[k].device()));
  for (int k = 1; k < N; ++k)
    if (in[k].scalar_type() != in[0].scalar_type())
      fail(std::string("expected ") + both +
           " tensors to have the same dtype, got " + first + " " +
           dtype_name(in[0].scalar_type()) + " and " + op.inputs[k] + " " +
           dtype_name(in[k].scalar_type()));
  const int dtype = dtype_index(in[0].scalar_type());
  if (!op_has_dtype(op, dtype))
    fail("unsupported dtype " + dtype_name(in[0].scalar_type()) +
         "; supported: " + supported_dtypes(op));
  for (int k = 1; k < N; ++k)
    if (!same_shape(in[0], in[k]))
      fail("expected tensors of the same shape (no broadcasting), got " +
           first + " " + shape_string(in[0]) + " and " + op.inputs[k] + " " +
           shape_string(in[k]));
  return dtype;
}

// ---------------------------------------------------------------- CPU kernels

typedef void (*CpuKernel)(const void* const* in, void* out, int64_t n);

// The op's rule over n elements, in torch's thread pool (vectorizing is the
// compiler's job here). The callback runs inside that pool: it must never
// throw.
template <typename Rule, typename T, int N>
void cpu_elementwise(const void* const* in, void* out, int64_t n) {
  const T* p[N];
  for (int k = 0; k < N; ++k) p[k] = static_cast<const T*>(in[k]);
  T* to = static_cast<T*>(out);
  torch::stable::parallel_for(0, n, kCpuGrainSize,
                              [=](int64_t begin, int64_t end) noexcept {
                                for (int64_t i = begin; i < end; ++i) {
                                  T v[N];
                                  for (int k = 0; k < N; ++k) v[k] = p[k][i];
                                  to[i] = cee::apply_rule<Rule>(v);
                                }
                              });
}

template <typename Rule, int N>
CpuKernel cpu_kernel(int dtype) {
  switch (dtype) {
#define CEE_CPU_CASE(id, device_type, size, scalar_type, name) \
  case CEE_DTYPE_##id:                                         \
    return &cpu_elementwise<                                   \
        Rule, c10::impl::ScalarTypeToCPPTypeT<ScalarType::scalar_type>, N>;
    CEE_FOR_EACH_DTYPE(CEE_CPU_CASE)
#undef CEE_CPU_CASE
  }
  return nullptr;
}

// ------------------------------------------------------------- CUDA dispatch

// torch's current CUDA stream. At stable-ABI target 2.10 there is no stable
// shim for it; aoti_torch_get_current_cuda_stream lives in libtorch_cuda.so,
// which torch loads RTLD_LOCAL, so look it up in that library by handle.
// A CPU-only torch has no such library: that is an error at call time, never
// at import time.
using GetCurrentCudaStream = AOTITorchError (*)(int32_t, void**);

GetCurrentCudaStream find_current_stream_getter() {
  static GetCurrentCudaStream cached = nullptr;
  if (cached) return cached;
  void* lib = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
  if (!lib) return nullptr;
  cached = reinterpret_cast<GetCurrentCudaStream>(
      dlsym(lib, "aoti_torch_get_current_cuda_stream"));
  dlclose(lib);  // RTLD_NOLOAD took a reference; torch still holds its own.
  return cached;
}

GetCurrentCudaStream require_cuda_torch() {
  GetCurrentCudaStream get_stream = find_current_stream_getter();
  if (!get_stream)
    fail(
        "got CUDA tensors, but the running torch has no CUDA support "
        "(libtorch_cuda.so is not loaded); install a CUDA build of torch");
  return get_stream;
}

// ----------------------------------------------------------------- the ops

// A new contiguous tensor like `t`. aoti_torch_empty_strided calls
// at::empty_strided directly: a boxed dispatcher call
// (torch::stable::new_empty) costs microseconds per op, which launch-bound
// callers notice.
Tensor empty_like_contiguous(const Tensor& t) {
  const int64_t ndim = t.dim();
  int64_t sizes[64], strides[64];  // torch caps tensors at 64 dimensions
  int64_t stride = 1;
  for (int64_t d = ndim - 1; d >= 0; --d) {
    sizes[d] = t.size(d);
    strides[d] = stride;
    stride *= sizes[d] > 1 ? sizes[d] : 1;
  }
  int32_t dtype = 0, device_type = 0;
  AtenTensorHandle handle = nullptr;
  if (aoti_torch_get_dtype(t.get(), &dtype) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_device_type(t.get(), &device_type) != AOTI_TORCH_SUCCESS ||
      aoti_torch_empty_strided(ndim, sizes, strides, dtype, device_type,
                               t.get_device_index(),
                               &handle) != AOTI_TORCH_SUCCESS)
    torch_call_failed("allocating the output");
  return Tensor(handle);
}

// Checks the inputs, packs non-contiguous ones (transposes, strided slices; an
// offset slice like x[1:] stays as it is, the kernels handle its alignment) and
// allocates the contiguous output; then the CPU kernel or the CUDA launch.
template <typename Rule, int N, bool kCuda>
Tensor run_elementwise(const cee::OpInfo& op, Tensor (&in)[N]) {
  // First: on a CPU-only torch, say that and only that.
  const GetCurrentCudaStream get_stream =
      kCuda ? require_cuda_torch() : nullptr;
  const int dtype = check_inputs(op, in);
  for (int k = 0; k < N; ++k)
    if (!in[k].is_contiguous())
      in[k] = torch_call("packing a non-contiguous input",
                         [&] { return torch::stable::contiguous(in[k]); });
  Tensor out = empty_like_contiguous(in[0]);
  const int64_t n = out.numel();
  if (n == 0) return out;
  const void* data[N];
  for (int k = 0; k < N; ++k) data[k] = in[k].const_data_ptr();
  if (!kCuda) {
    cpu_kernel<Rule, N>(dtype)(data, out.mutable_data_ptr(), n);
    return out;
  }
  if (!in[0].is_cuda())
    fail("the CUDA kernel got tensors on " + device_name(in[0].device()));
  // No device guard: nothing here uses the current device. The allocations
  // guard themselves (at::empty_strided, contiguous), the stream is asked for
  // by index, and the launcher makes the device's primary context current
  // only if it is not (csrc/launcher.cpp). A guard per call cost a guard
  // object's create and destroy through the shim on every launch.
  const int32_t device = in[0].get_device_index();
  void* stream = nullptr;
  if (get_stream(device, &stream) != AOTI_TORCH_SUCCESS)
    torch_call_failed("getting torch's current CUDA stream");
  char err[1024] = {0};
  if (cee::launch_elementwise(op, dtype, data, out.mutable_data_ptr(), n,
                              device, stream, err, sizeof err) != 0)
    throw std::runtime_error(err);  // already names the op
  return out;
}

// The typed functions torch boxes, one per arity.
template <int N, const cee::OpInfo* op, typename Rule, bool kCuda>
struct Entry;
template <const cee::OpInfo* op, typename Rule, bool kCuda>
struct Entry<1, op, Rule, kCuda> {
  static Tensor call(Tensor x) {
    Tensor in[1] = {x};
    return run_elementwise<Rule, 1, kCuda>(*op, in);
  }
};
template <const cee::OpInfo* op, typename Rule, bool kCuda>
struct Entry<2, op, Rule, kCuda> {
  static Tensor call(Tensor a, Tensor b) {
    Tensor in[2] = {a, b};
    return run_elementwise<Rule, 2, kCuda>(*op, in);
  }
};
template <const cee::OpInfo* op, typename Rule, bool kCuda>
struct Entry<3, op, Rule, kCuda> {
  static Tensor call(Tensor a, Tensor b, Tensor c) {
    Tensor in[3] = {a, b, c};
    return run_elementwise<Rule, 3, kCuda>(*op, in);
  }
};

// ------------------------------------------------- the exception boundary

using BoxedKernel = void (*)(StableIValue*, uint64_t, uint64_t);

// Runs a boxed kernel; returns false with the message in `message` if it threw.
// Everything with a destructor lives and dies inside this function.
__attribute__((noinline)) bool run_catching(
    BoxedKernel kernel, StableIValue* stack, uint64_t num_args,
    uint64_t num_outputs, const char* op, char* message, size_t message_len) {
  const char* what = "unknown C++ exception";
  try {
    kernel(stack, num_args, num_outputs);
    return true;
  } catch (const std::exception& e) {
    what = e.what();
    // Messages from the CUDA launcher already start with the op name; those
    // of the input checks, torch shim failures and allocations do not.
    if (strncmp(what, op, strlen(op)) == 0) {
      snprintf(message, message_len, "%s", what);
      return false;
    }
  } catch (...) {
  }
  snprintf(message, message_len, "%s: %s", op, what);
  return false;
}

// What torch calls. No object with a destructor is alive here when
// aoti_torch_check throws, so torch's exception unwinds through this frame
// without touching our C++ runtime.
template <BoxedKernel kernel, const cee::OpInfo* op>
void guarded(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  char message[2048];
  if (run_catching(kernel, stack, num_args, num_outputs, op->qualname, message,
                   sizeof message))
    return;
  aoti_torch_check(false, op->qualname, __FILE__, __LINE__, message);
}

// Each op's CPU and CUDA function, boxed for torch.
#define CEE_BOXED(name, rule, arity, schema)            \
  constexpr auto cpu_##name =                           \
      &Entry<arity, &cee_op_##name, rule, false>::call; \
  constexpr auto cuda_##name =                          \
      &Entry<arity, &cee_op_##name, rule, true>::call;  \
  constexpr BoxedKernel boxed_cpu_##name =              \
      &guarded<TORCH_BOX(cpu_##name), &cee_op_##name>;  \
  constexpr BoxedKernel boxed_cuda_##name =             \
      &guarded<TORCH_BOX(cuda_##name), &cee_op_##name>;
CEE_FOR_EACH_OP(CEE_BOXED)
#undef CEE_BOXED

}  // namespace

STABLE_TORCH_LIBRARY(CEE_NAMESPACE, m) {
#define CEE_DEF(name, rule, arity, schema) m.def(schema);
  CEE_FOR_EACH_OP(CEE_DEF)
#undef CEE_DEF
  // Each op's no-grad twin: the same kernels, no autograd kernel (torch's
  // default autograd fallback passes through). The Python wrapper calls it
  // when no graph is built: benchmarks/NOTES.md change 22.
#define CEE_DEF_TWIN(name, twin, schema) m.def(schema);
  CEE_FOR_EACH_NO_GRAD_TWIN(CEE_DEF_TWIN)
#undef CEE_DEF_TWIN
}

STABLE_TORCH_LIBRARY_IMPL(CEE_NAMESPACE, CPU, m) {
#define CEE_IMPL(name, rule, arity, schema) m.impl(#name, boxed_cpu_##name);
  CEE_FOR_EACH_OP(CEE_IMPL)
#undef CEE_IMPL
#define CEE_IMPL_TWIN(name, twin, schema) m.impl(#twin, boxed_cpu_##name);
  CEE_FOR_EACH_NO_GRAD_TWIN(CEE_IMPL_TWIN)
#undef CEE_IMPL_TWIN
}

STABLE_TORCH_LIBRARY_IMPL(CEE_NAMESPACE, CUDA, m) {
#define CEE_IMPL(name, rule, arity, schema) m.impl(#name, boxed_cuda_##name);
  CEE_FOR_EACH_OP(CEE_IMPL)
#undef CEE_IMPL
#define CEE_IMPL_TWIN(name, twin, schema) m.impl(#twin, boxed_cuda_##name);
  CEE_FOR_EACH_NO_GRAD_TWIN(CEE_IMPL_TWIN)
#undef CEE_IMPL_TWIN
}

// The Python module. Importing it runs the registrations above; its functions
// expose the launch-shape choice (csrc/elementwise_launch.h), which has no
// torch op: what tests check with no GPU, and what the tuning command forces.
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

// launch_shape(gpu_name, inputs, element_bytes, bytes_per_tensor)
//   -> (table, shape index)
PyObject* py_launch_shape(PyObject*, PyObject* args) {
  const char* gpu = nullptr;
  int inputs = 0, element_bytes = 0;
  long long bytes = 0;
  if (!PyArg_ParseTuple(args, "siiL", &gpu, &inputs, &element_bytes, &bytes))
    return nullptr;
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
      cee::choose_vector_shape(table, inputs, element_bytes, bytes));
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

PyMethodDef cee_methods[] = {
    {"vector_shapes", py_vector_shapes, METH_NOARGS,
     "The compiled launch shapes: [(access bytes, block, per thread, load), "
     "...]"},
    {"launch_shape", py_launch_shape, METH_VARARGS,
     "launch_shape(gpu_name, inputs, element_bytes, bytes_per_tensor) -> "
     "(table, shape index): the shape the launcher takes"},
    {"force_launch_shape", py_force_launch_shape, METH_VARARGS,
     "force_launch_shape(index): every vectorized launch takes this shape "
     "(-1: the per-GPU tables); for tuning and tests"},
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
