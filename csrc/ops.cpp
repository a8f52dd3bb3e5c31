// Host side of cuda_ext_example: the torch ops, their input checks, the CPU
// kernels and the CUDA dispatch. Uses only the LibTorch stable ABI
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
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <exception>
#include <string>

#include "add_as_torch.h"
#include "launcher.h"

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Device;
using torch::stable::Tensor;

constexpr int64_t kCpuGrainSize = 1 << 16;

[[noreturn]] void fail(const std::string& message) {
  throw std::runtime_error(message);
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

// The dtypes of kernel_table.h, as torch names them.
bool dtype_supported(ScalarType t, cee_dtype* out) {
  switch (t) {
#define CEE_DTYPE_CASE(id, device_type, size, scalar_type, name) \
  case ScalarType::scalar_type: *out = CEE_##id; return true;
    CEE_FOR_EACH_DTYPE(CEE_DTYPE_CASE)
#undef CEE_DTYPE_CASE
    default: return false;
  }
}

std::string supported_dtypes() {
  std::string names;
#define CEE_DTYPE_NAME(id, device_type, size, scalar_type, name) \
  names += names.empty() ? "torch." #name : ", torch." #name;
  CEE_FOR_EACH_DTYPE(CEE_DTYPE_NAME)
#undef CEE_DTYPE_NAME
  return names;
}

// Same rules, and the same words, as the fake kernels in
// cuda_ext_example/ops.py.
cee_dtype check_inputs(const Tensor& a, const Tensor& b) {
  if (a.layout() != torch::headeronly::Layout::Strided ||
      b.layout() != torch::headeronly::Layout::Strided)
    fail("expected dense (strided) tensors, got a sparse or other layout");
  if (!(a.device() == b.device()))
    fail("expected both tensors on the same device, got a on " +
         device_name(a.device()) + " and b on " + device_name(b.device()));
  if (a.scalar_type() != b.scalar_type())
    fail("expected both tensors to have the same dtype, got a " +
         dtype_name(a.scalar_type()) + " and b " + dtype_name(b.scalar_type()));
  cee_dtype dtype;
  if (!dtype_supported(a.scalar_type(), &dtype))
    fail("unsupported dtype " + dtype_name(a.scalar_type()) +
         "; supported: " + supported_dtypes());
  bool same_shape = a.dim() == b.dim();
  for (int64_t d = 0; same_shape && d < a.dim(); ++d)
    same_shape = a.size(d) == b.size(d);
  if (!same_shape)
    fail("expected tensors of the same shape (no broadcasting), got a " +
         shape_string(a) + " and b " + shape_string(b));
  return dtype;
}

// ---------------------------------------------------------------- CPU kernels

template <typename T>
void cpu_add_typed(const void* a, const void* b, void* out, int64_t n) {
  const T* ta = static_cast<const T*>(a);
  const T* tb = static_cast<const T*>(b);
  T* to = static_cast<T*>(out);
  // The callback runs inside torch's thread pool: it must never throw.
  torch::stable::parallel_for(0, n, kCpuGrainSize,
                              [=](int64_t begin, int64_t end) noexcept {
                                for (int64_t i = begin; i < end; ++i)
                                  to[i] = cee::add_as_torch(ta[i], tb[i]);
                              });
}

void cpu_add(cee_dtype dtype, const void* a, const void* b, void* out,
             int64_t n) {
  switch (dtype) {
#define CEE_CPU_CASE(id, device_type, size, scalar_type, name)               \
  case CEE_##id:                                                             \
    return cpu_add_typed<                                                    \
        c10::impl::ScalarTypeToCPPTypeT<ScalarType::scalar_type>>(a, b, out, \
                                                                  n);
    CEE_FOR_EACH_DTYPE(CEE_CPU_CASE)
#undef CEE_CPU_CASE
    case CEE_NUM_DTYPES: break;
  }
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

void cuda_add(GetCurrentCudaStream get_stream, cee_kernel kernel,
              const char* op, cee_dtype dtype, const Tensor& a, const Tensor& b,
              Tensor& out) {
  const int32_t device = a.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  void* stream = nullptr;
  if (get_stream(device, &stream) != AOTI_TORCH_SUCCESS)
    fail("could not get torch's current CUDA stream for cuda:" +
         std::to_string(device));
  char err[1024] = {0};
  if (cee_cuda_add(kernel, dtype, a.const_data_ptr(), b.const_data_ptr(),
                   out.mutable_data_ptr(), out.numel(), device, stream, op, err,
                   sizeof err) != 0)
    throw std::runtime_error(err);  // already names the op
}

// ----------------------------------------------------------------- the ops

struct Prepared {
  cee_dtype dtype;
  Tensor a, b, out;
};

// A new contiguous tensor like `t`. aoti_torch_empty_strided calls
// at::empty_strided directly: a boxed dispatcher call
// (torch::stable::new_empty) costs microseconds per op, which launch-bound
// callers notice. (TORCH_ERROR_CODE_CHECK, not the newer STABLE_ spelling:
// the JIT build compiles against the user's torch >= 2.10 headers.)
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
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(t.get(), &dtype));
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(t.get(), &device_type));
  AtenTensorHandle handle = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(
      ndim, sizes, strides, dtype, device_type, t.get_device_index(), &handle));
  return Tensor(handle);
}

// Checks, packs non-contiguous inputs (transposes, strided slices; an offset
// slice like x[1:] stays as it is, the kernels handle its alignment) and
// allocates the contiguous output.
Prepared prepare(const Tensor& a, const Tensor& b) {
  const cee_dtype dtype = check_inputs(a, b);
  Tensor ac = a.is_contiguous() ? a : torch::stable::contiguous(a);
  Tensor bc = b.is_contiguous() ? b : torch::stable::contiguous(b);
  return {dtype, ac, bc, empty_like_contiguous(ac)};
}

// The CPU kernel serves both ops: vectorizing is the compiler's job there.
Tensor add_cpu(Tensor a, Tensor b) {
  Prepared p = prepare(a, b);
  if (p.out.numel() > 0)
    cpu_add(p.dtype, p.a.const_data_ptr(), p.b.const_data_ptr(),
            p.out.mutable_data_ptr(), p.out.numel());
  return p.out;
}

Tensor add_cuda(const Tensor& a, const Tensor& b, cee_kernel kernel,
                const char* op) {
  // First: on a CPU-only torch, say that and only that.
  const GetCurrentCudaStream get_stream = require_cuda_torch();
  Prepared p = prepare(a, b);
  if (!p.a.is_cuda())
    fail("the CUDA kernel got tensors on " + device_name(p.a.device()));
  cuda_add(get_stream, kernel, op, p.dtype, p.a, p.b, p.out);
  return p.out;
}

constexpr char kMyAdd[] = "cuda_ext_example.my_add";
constexpr char kMyFastAdd[] = "cuda_ext_example.my_fast_add";

Tensor my_add_cuda(Tensor a, Tensor b) {
  return add_cuda(a, b, CEE_KERNEL_SIMPLE, kMyAdd);
}
Tensor my_fast_add_cuda(Tensor a, Tensor b) {
  return add_cuda(a, b, CEE_KERNEL_VECTORIZED, kMyFastAdd);
}

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
template <BoxedKernel kernel, const char* op>
void guarded(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  char message[2048];
  if (run_catching(kernel, stack, num_args, num_outputs, op, message,
                   sizeof message))
    return;
  aoti_torch_check(false, op, __FILE__, __LINE__, message);
}

}  // namespace

// The JIT build (cuda_ext_example/jit.py) registers the same code under another
// namespace, so it can be loaded next to the installed wheel.
#ifndef CEE_NAMESPACE
#define CEE_NAMESPACE cuda_ext_example
#endif

STABLE_TORCH_LIBRARY(CEE_NAMESPACE, m) {
  m.def("my_add(Tensor a, Tensor b) -> Tensor");
  m.def("my_fast_add(Tensor a, Tensor b) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(CEE_NAMESPACE, CPU, m) {
  m.impl("my_add", &guarded<TORCH_BOX(&add_cpu), kMyAdd>);
  m.impl("my_fast_add", &guarded<TORCH_BOX(&add_cpu), kMyFastAdd>);
}

STABLE_TORCH_LIBRARY_IMPL(CEE_NAMESPACE, CUDA, m) {
  m.impl("my_add", &guarded<TORCH_BOX(&my_add_cuda), kMyAdd>);
  m.impl("my_fast_add", &guarded<TORCH_BOX(&my_fast_add_cuda), kMyFastAdd>);
}

// The Python module: empty, importing it runs the registrations above.
static PyModuleDef cee_module = {
    PyModuleDef_HEAD_INIT,
    "_C",
    "cuda_ext_example's compiled ops; use torch.ops.cuda_ext_example.*",
    -1,
    nullptr,
};

extern "C" __attribute__((visibility("default"))) PyObject* PyInit__C(void) {
  return PyModule_Create(&cee_module);
}
