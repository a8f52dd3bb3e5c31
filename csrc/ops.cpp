// Host side of every declared op: the torch registrations and the CUDA
// dispatch, generated from the op table (cee_generated.h, written by the build
// from ops/*/ops.toml). Op-agnostic: a kernel author never edits this file.
// Uses only the LibTorch stable ABI (TORCH_TARGET_VERSION 2.10), so one binary
// loads on every torch >= 2.10. Built by zig (clang + its own static libc++)
// against glibc 2.17; torch_boundary.h keeps our C++ exceptions on our side.
#include <dlfcn.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <string>

// clang-format off: first, the op table names ops by it
#include "op_namespace.h"
// clang-format on
#include "cee_generated.h"
#include "cpu_kernels.h"
#include "elementwise_launch.h"
#include "host_float16.h"
#include "input_checks.h"
#include "torch_boundary.h"

namespace {

using namespace cee;

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

// Where an op's kernel runs. Meta: the input checks and an output on the meta
// device, which is what torch.compile and FakeTensorMode run, so the rules
// are stated once, here, for real and fake tensors alike.
enum class Backend { Cpu, Cuda, Meta };

// Checks the inputs, packs non-contiguous ones (transposes, strided slices; an
// offset slice like x[1:] stays as it is, the kernels handle its alignment) and
// allocates the contiguous output; then the CPU kernel or the CUDA launch.
template <typename Rule, int N, Backend kBackend>
Tensor run_elementwise(const cee::OpInfo& op, Tensor (&in)[N]) {
  constexpr bool kCuda = kBackend == Backend::Cuda;
  // First: on a CPU-only torch, say that and only that.
  const GetCurrentCudaStream get_stream =
      kCuda ? require_cuda_torch() : nullptr;
  const int dtype = check_inputs(op, in);
  if (kBackend == Backend::Meta) return empty_like_contiguous(in[0]);
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
template <int N, const cee::OpInfo* op, typename Rule, Backend kBackend>
struct Entry;
template <const cee::OpInfo* op, typename Rule, Backend kBackend>
struct Entry<1, op, Rule, kBackend> {
  static Tensor call(Tensor x) {
    Tensor in[1] = {x};
    return run_elementwise<Rule, 1, kBackend>(*op, in);
  }
};
template <const cee::OpInfo* op, typename Rule, Backend kBackend>
struct Entry<2, op, Rule, kBackend> {
  static Tensor call(Tensor a, Tensor b) {
    Tensor in[2] = {a, b};
    return run_elementwise<Rule, 2, kBackend>(*op, in);
  }
};
template <const cee::OpInfo* op, typename Rule, Backend kBackend>
struct Entry<3, op, Rule, kBackend> {
  static Tensor call(Tensor a, Tensor b, Tensor c) {
    Tensor in[3] = {a, b, c};
    return run_elementwise<Rule, 3, kBackend>(*op, in);
  }
};

// Each op's function per backend, boxed for torch.
#define CEE_BOXED(name, rule, arity, schema)                               \
  template <Backend kBackend>                                              \
  constexpr BoxedKernel boxed_##name =                                     \
      &guarded<TORCH_BOX(                                                  \
                   (&Entry<arity, &cee_op_##name, rule, kBackend>::call)), \
               &cee_op_##name>;
CEE_FOR_EACH_OP(CEE_BOXED)
#undef CEE_BOXED

// Every op and its no-grad twin get the backend's kernel.
template <Backend kBackend>
void register_kernels(torch::stable::detail::StableLibrary& m) {
#define CEE_IMPL(name, rule, arity, schema) \
  m.impl(#name, boxed_##name<kBackend>);
  CEE_FOR_EACH_OP(CEE_IMPL)
#undef CEE_IMPL
#define CEE_IMPL_TWIN(name, twin, schema) m.impl(#twin, boxed_##name<kBackend>);
  CEE_FOR_EACH_NO_GRAD_TWIN(CEE_IMPL_TWIN)
#undef CEE_IMPL_TWIN
}

}  // namespace

STABLE_TORCH_LIBRARY(CEE_NAMESPACE, m) {
#define CEE_DEF(name, rule, arity, schema) m.def(schema);
  CEE_FOR_EACH_OP(CEE_DEF)
#undef CEE_DEF
  // Each op's no-grad twin: the same kernels, no autograd kernel (torch's
  // default autograd fallback passes through). The Python function calls it
  // when no graph is built (cuda_ext_example/fast_path.py).
#define CEE_DEF_TWIN(name, twin, schema) m.def(schema);
  CEE_FOR_EACH_NO_GRAD_TWIN(CEE_DEF_TWIN)
#undef CEE_DEF_TWIN
}

STABLE_TORCH_LIBRARY_IMPL(CEE_NAMESPACE, CPU, m) {
  register_kernels<Backend::Cpu>(m);
}
STABLE_TORCH_LIBRARY_IMPL(CEE_NAMESPACE, CUDA, m) {
  register_kernels<Backend::Cuda>(m);
}
STABLE_TORCH_LIBRARY_IMPL(CEE_NAMESPACE, Meta, m) {
  register_kernels<Backend::Meta>(m);
}
