// Host side of every declared op: the torch registrations and the CUDA
// dispatch, generated from the op table (cee_generated.h, written by the build
// from ops/*/ops.toml). Op-agnostic: a kernel author never edits this file.
// Uses only the LibTorch stable ABI (TORCH_TARGET_VERSION 2.10), so one binary
// loads on every torch >= 2.10. Built by zig (clang + its own static libc++)
// against glibc 2.17; torch_boundary.h keeps our C++ exceptions on our side.
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <limits>
#include <string>
#include <type_traits>

// clang-format off: first, the op table names ops by it
#include "op_namespace.h"
// clang-format on
#include "cee_generated.h"
#include "cpu_kernels.h"
#include "elementwise_launch.h"
#include "host_float16.h"
#include "input_checks.h"
#include "new_tensors.h"
#include "torch_boundary.h"
#include "torch_cuda.h"

namespace {

using namespace cee;

// ----------------------------------------------------------------- the ops

// The strided kernels' geometry of a call: each input's strides over the
// output's dimensions (0 where it broadcasts), size-1 dimensions dropped and
// neighbours merged where every input allows. False if more than kMaxDims are
// left.
template <int N>
bool make_strided(const Tensor (&in)[N], const Shape& shape, Strided<N>* g) {
  g->ndim = 0;
  for (int64_t d = 0; d < shape.ndim; ++d) {
    if (shape.sizes[d] == 1) continue;
    long long strides[N];
    for (int k = 0; k < N; ++k) {
      const int64_t own = d - (shape.ndim - in[k].dim());
      strides[k] = own < 0 || in[k].size(own) == 1 ? 0 : in[k].stride(own);
    }
    const int last = g->ndim - 1;
    bool merge = last >= 0;
    for (int k = 0; merge && k < N; ++k)
      merge = g->strides[k][last] == strides[k] * shape.sizes[d];
    if (merge) {
      g->sizes[last] *= shape.sizes[d];
      for (int k = 0; k < N; ++k) g->strides[k][last] = strides[k];
      continue;
    }
    if (g->ndim == kMaxDims) return false;
    g->sizes[g->ndim] = shape.sizes[d];
    for (int k = 0; k < N; ++k) g->strides[k][g->ndim] = strides[k];
    ++g->ndim;
  }
  return true;
}

// A scalar argument that the dtype cannot hold is refused, as torch refuses
// alpha=1000 for int8 tensors.
template <typename T>
void check_scalars_fit(const OpInfo& op, const ScalarValues& values) {
  typedef typename Compute<T>::type C;
  for (int j = 0; j < op.num_scalars; ++j) {
    const std::string name = op.scalar_names[j];
    if constexpr (std::is_integral_v<T>) {
      const long long v = values.integer[j];
      if (op.scalar_kinds[j] == kScalarInt &&
          (v < (long long)std::numeric_limits<T>::min() ||
           (v > 0 && (unsigned long long)v >
                         (unsigned long long)std::numeric_limits<T>::max())))
        fail(name + "=" + std::to_string(v) + " does not fit the tensors' " +
             "dtype");
    }
    if constexpr (std::is_same_v<C, float>) {
      const double v = values.real[j];
      if (op.scalar_kinds[j] == kScalarFloat && v - v == 0 &&
          (v > std::numeric_limits<float>::max() ||
           v < -std::numeric_limits<float>::max()))
        fail(name + "=" + std::to_string(v) +
             " does not fit float, the compute type of the tensors' dtype");
    }
  }
}

// Where an op's kernel runs. Meta: the input checks and outputs on the meta
// device, which is what torch.compile and FakeTensorMode run, so the rules
// are stated once, here, for real and fake tensors alike.
enum class Backend { Cpu, Cuda, Meta };

// The call's kernel parameters for dtype T, then the CPU kernel or the launch.
template <typename Sig, typename T, Backend kBackend>
void run_typed(const OpInfo& op, const Tensor (&in)[Sig::kInputs],
               Tensor (&out)[AtLeastOne<Sig::kOutputs>::value],
               const ScalarValues& values, const Shape& shape,
               GetCurrentCudaStream get_stream) {
  constexpr int N = Sig::kInputs, M = Sig::kOutputs;
  typedef typename Compute<T>::type C;
  check_scalars_fit<T>(op, values);
  Pointers<T, N, M> pointers = {};
  const void* data[N + AtLeastOne<M>::value];
  for (int k = 0; k < N; ++k)
    data[k] = pointers.in[k] = static_cast<T*>(
        (op.mutated & (1u << k)) ? in[k].mutable_data_ptr()
                                 : const_cast<void*>(in[k].const_data_ptr()));
  for (int j = 0; j < M; ++j)
    data[N + j] = pointers.out[j] = static_cast<T*>(out[j].mutable_data_ptr());
  typename Sig::template Scalars<C> scalars = Sig::template scalars<C>(values);
  bool same = true;
  for (int k = 0; k < N; ++k)
    same = same && shape.equals(in[k]) && in[k].is_contiguous();
  Strided<N> geometry;
  if (!same && !make_strided(in, shape, &geometry))
    fail("the call needs more than " + std::to_string(kMaxDims) +
         " dimensions that cannot be merged (output shape " + shape.str() +
         "); make the inputs contiguous first");
  const void* strided = same ? nullptr : &geometry;
  const int64_t n = shape.numel();
  if (kBackend == Backend::Cpu) {
    cpu_elementwise<Sig, T>(&pointers, &scalars, strided, n);
    return;
  }
  if (!in[0].is_cuda())
    fail("the CUDA kernel got tensors on " + device_name(in[0].device()));
  // No device guard: nothing here uses the current device. The allocations
  // guard themselves (at::empty_strided), the stream is asked for by index,
  // and the launcher makes the device's primary context current only if it is
  // not (csrc/launcher.cpp). A guard per call cost a guard object's create and
  // destroy through the shim on every launch.
  const int32_t device = in[0].get_device_index();
  void* stream = nullptr;
  if (get_stream(device, &stream) != AOTI_TORCH_SUCCESS)
    torch_call_failed("getting torch's current CUDA stream");
  const LaunchArgs args = {&pointers, &scalars, const_cast<void*>(strided)};
  char err[1024] = {0};
  if (launch_elementwise(op, dtype_index(in[0].scalar_type()), data, args, n,
                         device, stream, err, sizeof err) != 0)
    throw std::runtime_error(err);  // already names the op
}

// One op's boxed kernel: unboxes the tensors and scalars, checks them,
// allocates the outputs, runs the dtype's kernel and boxes the outputs.
template <typename Sig, const OpInfo* op, Backend kBackend>
void run_elementwise(StableIValue* stack, uint64_t, uint64_t) {
  constexpr int N = Sig::kInputs, M = Sig::kOutputs;
  constexpr bool kCuda = kBackend == Backend::Cuda;
  Tensor in[N];
  for (int k = 0; k < N; ++k)
    in[k] = torch::stable::detail::to<Tensor>(stack[k]);
  ScalarValues values = {};
  for (int j = 0; j < op->num_scalars; ++j) {
    const StableIValue v = stack[N + j];
    if (op->scalar_kinds[j] == kScalarFloat)
      values.real[j] = torch::stable::detail::to<double>(v);
    else if (op->scalar_kinds[j] == kScalarInt)
      values.integer[j] = torch::stable::detail::to<int64_t>(v);
    else
      values.integer[j] = torch::stable::detail::to<bool>(v);
  }
  // First: on a CPU-only torch, say that and only that.
  const GetCurrentCudaStream get_stream =
      kCuda ? require_cuda_torch() : nullptr;
  Shape shape;
  const int dtype = check_inputs(*op, in, &shape, kBackend == Backend::Meta);
  Tensor out[AtLeastOne<M>::value];
  for (int j = 0; j < M; ++j)
    out[j] = new_empty(in[0], shape.sizes, shape.ndim);
  if (kBackend != Backend::Meta && shape.numel() > 0) {
    bool ran = false;
#define CEE_RUN_DTYPE(id, device_type, size, scalar_type, name)              \
  if constexpr ((Sig::kDtypes >> CEE_DTYPE_##id) & 1u) {                     \
    if (dtype == CEE_DTYPE_##id) {                                           \
      run_typed<Sig, HostType_##name, kBackend>(*op, in, out, values, shape, \
                                                get_stream);                 \
      ran = true;                                                            \
    }                                                                        \
  }
    CEE_FOR_EACH_DTYPE(CEE_RUN_DTYPE)
#undef CEE_RUN_DTYPE
    if (!ran) fail("no kernel for this dtype");  // check_inputs said otherwise
  }
  for (int j = 0; j < M; ++j) stack[j] = torch::stable::detail::from(out[j]);
}

// Each op's function per backend, boxed for torch.
#define CEE_BOXED(name, signature, schema)                            \
  template <Backend kBackend>                                         \
  constexpr BoxedKernel boxed_##name =                                \
      &guarded<&run_elementwise<signature, &cee_op_##name, kBackend>, \
               &cee_op_##name>;
CEE_FOR_EACH_OP(CEE_BOXED)
#undef CEE_BOXED

// Every op and its no-grad twin get the backend's kernel.
template <Backend kBackend>
void register_kernels(torch::stable::detail::StableLibrary& m) {
#define CEE_IMPL(name, signature, schema) m.impl(#name, boxed_##name<kBackend>);
  CEE_FOR_EACH_OP(CEE_IMPL)
#undef CEE_IMPL
#define CEE_IMPL_TWIN(name, twin, schema) m.impl(#twin, boxed_##name<kBackend>);
  CEE_FOR_EACH_NO_GRAD_TWIN(CEE_IMPL_TWIN)
#undef CEE_IMPL_TWIN
}

}  // namespace

STABLE_TORCH_LIBRARY(CEE_NAMESPACE, m) {
#define CEE_DEF(name, signature, schema) m.def(schema);
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
