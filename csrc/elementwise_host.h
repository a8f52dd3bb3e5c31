// The core's host function of every elementwise op (an op with a `rule` in
// its ops.toml): unboxes the tensors and scalars, checks them, allocates the
// outputs, and runs the rule over the elements with the CPU kernel or the
// CUDA kernels; on a meta call, the checks and the outputs only. Written
// against the same host API as an op's own host.h (host_api.h).
#pragma once
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <limits>
#include <string>
#include <type_traits>

#include "cee_generated.h"
#include "cpu_kernels.h"
#include "elementwise_launch.h"
#include "host_api.h"
#include "host_float16.h"
#include "input_checks.h"
#include "new_tensors.h"
#include "torch_boundary.h"
#include "torch_cuda.h"
#include "torch_versions.h"

namespace cee {

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
// alpha=1000 for int8 tensors: on every call, fake and empty ones too.
template <typename T>
void check_scalars_fit(const ElementwiseInfo& op, const ScalarValues& values) {
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
        fail(name + "=" + scalar_string(v) +
             " does not fit float, the compute type of the tensors' dtype");
    }
  }
}

// A call whose layout needs more than kMaxDims dimensions after merging (a
// rare mix of broadcasts and strides): each input it reads is made a
// contiguous tensor of the call's shape (its broadcast written out), and each
// input it updates that is not contiguous is worked on in a contiguous copy,
// copied back after the kernel ran. Then every tensor is same-shape and
// contiguous.
// Returns the mask of inputs to copy back (bit k: given[k] from in[k]).
template <int N>
unsigned make_dense(const ElementwiseInfo& op, Tensor (&in)[N],
                    const Shape& shape) {
  unsigned copy_back = 0;
  for (int k = 0; k < N; ++k) {
    const bool mutated = op.mutated & (1u << k);
    if (mutated && in[k].is_contiguous()) continue;
    Tensor dense = new_empty(in[k], shape.sizes, shape.ndim);
    torch_call("copying an input into a contiguous tensor",
               [&] { torch::stable::copy_(dense, in[k]); });
    if (mutated) copy_back |= 1u << k;
    in[k] = dense;
  }
  return copy_back;
}

// The call's kernel parameters for dtype T, then the CPU kernel or the launch.
template <typename Sig, typename T, Backend kBackend>
void run_typed(const OpInfo& info, const Tensor (&given)[Sig::kInputs],
               Tensor (&out)[AtLeastOne<Sig::kOutputs>::value],
               const ScalarValues& values, const Shape& shape,
               GetCurrentCudaStream get_stream) {
  constexpr int N = Sig::kInputs, M = Sig::kOutputs;
  typedef typename Compute<T>::type C;
  const ElementwiseInfo& op = *info.elementwise;
  Tensor in[N];
  for (int k = 0; k < N; ++k) in[k] = given[k];
  unsigned copy_back = 0;
  bool same = true;
  for (int k = 0; k < N; ++k)
    same = same && shape.equals(in[k]) && in[k].is_contiguous();
  Strided<N> geometry;
  if (!same && !make_strided(in, shape, &geometry)) {
    copy_back = make_dense(op, in, shape);
    same = true;
  }
  Pointers<T, N, M> pointers = {};
  const void* data[N + AtLeastOne<M>::value];
  for (int k = 0; k < N; ++k)
    data[k] = pointers.in[k] = static_cast<T*>(
        (op.mutated & (1u << k)) ? mutable_data(in[k])
                                 : const_cast<void*>(const_data(in[k])));
  for (int j = 0; j < M; ++j)
    data[N + j] = pointers.out[j] = mutable_data<T>(out[j]);
  typename Sig::template Scalars<C> scalars = Sig::template scalars<C>(values);
  const void* strided = same ? nullptr : &geometry;
  const int64_t n = shape.numel();
  if (kBackend == Backend::Cpu) {
    cpu_elementwise<Sig, T>(&pointers, &scalars, strided, n);
  } else {
    if (!in[0].is_cuda())
      fail("the CUDA kernel got tensors on " + device_name(in[0].device()));
    // No device guard: nothing here uses the current device. The allocations
    // guard themselves (at::empty_strided), the stream is asked for by index,
    // and the launcher makes the device's primary context current only if it
    // is not (csrc/launcher.cpp).
    const int32_t device = in[0].get_device_index();
    void* stream = nullptr;
    if (get_stream(device, &stream) != AOTI_TORCH_SUCCESS)
      torch_call_failed("getting torch's current CUDA stream");
    const LaunchArgs args = {&pointers, &scalars, const_cast<void*>(strided)};
    char err[1024] = {0};
    if (launch_elementwise(info, dtype_index(in[0].scalar_type()), data, args,
                           n, device, stream, err, sizeof err) != 0)
      throw std::runtime_error(err);  // already names the op
  }
  for (int k = 0; k < N; ++k)
    if (copy_back & (1u << k)) {
      Tensor target = given[k];
      torch_call("copying the result back into an input updated in place",
                 [&] { torch::stable::copy_(target, in[k]); });
    }
}

// The host function of an elementwise op over its rule's signature Sig.
template <typename Sig>
struct ElementwiseHost {
  template <Backend kBackend>
  static void run(const OpInfo& info, StableIValue* stack, uint64_t, uint64_t) {
    constexpr int N = Sig::kInputs, M = Sig::kOutputs;
    constexpr bool kCuda = kBackend == Backend::Cuda;
    const ElementwiseInfo& op = *info.elementwise;
    Tensor in[N];
    for (int k = 0; k < N; ++k)
      in[k] = torch::stable::detail::to<Tensor>(stack[k]);
    ScalarValues values = {};
    for (int j = 0; j < op.num_scalars; ++j) {
      const StableIValue v = stack[N + j];
      if (op.scalar_kinds[j] == kScalarFloat)
        values.real[j] = torch::stable::detail::to<double>(v);
      else if (op.scalar_kinds[j] == kScalarInt)
        values.integer[j] = torch::stable::detail::to<int64_t>(v);
      else
        values.integer[j] = torch::stable::detail::to<bool>(v);
    }
    // First: on a CPU-only torch, say that and only that.
    const GetCurrentCudaStream get_stream =
        kCuda ? require_cuda_torch() : nullptr;
    Shape shape;
    const int dtype = check_inputs(info, in, &shape, kBackend == Backend::Meta);
    Tensor out[AtLeastOne<M>::value];
    for (int j = 0; j < M; ++j)
      out[j] = new_empty(in[0], shape.sizes, shape.ndim);
    bool ran = false;
#define CEE_RUN_DTYPE(id, device_type, size, scalar_type, name)          \
  if constexpr ((Sig::kDtypes >> CEE_DTYPE_##id) & 1u) {                 \
    if (dtype == CEE_DTYPE_##id) {                                       \
      check_scalars_fit<HostType_##name>(op, values);                    \
      if (kBackend != Backend::Meta && shape.numel() > 0)                \
        run_typed<Sig, HostType_##name, kBackend>(info, in, out, values, \
                                                  shape, get_stream);    \
      ran = true;                                                        \
    }                                                                    \
  }
    CEE_FOR_EACH_DTYPE(CEE_RUN_DTYPE)
#undef CEE_RUN_DTYPE
    if (!ran) fail("no kernel for this dtype");  // check_inputs said otherwise
    for (int j = 0; j < M; ++j) stack[j] = torch::stable::detail::from(out[j]);
  }
};

// The host function of an op with its own (ops/<folder>/host.h), boxed by the
// stable ABI (its schema's arguments unboxed, its results boxed).
template <auto function>
struct HostFunction {
  template <Backend kBackend>
  static void run(const OpInfo&, StableIValue* stack, uint64_t num_args,
                  uint64_t num_outputs) {
    TORCH_BOX(function)(stack, num_args, num_outputs);
  }
};

}  // namespace cee
