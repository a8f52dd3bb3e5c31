// The host API every op's host function is written against: the core's
// elementwise one (elementwise_host.h) and each ops/<folder>/host.h (included
// after this, inside namespace cee_rule_<folder>). A host function takes and
// returns torch::stable::Tensor and the schema's scalars; it checks its inputs
// (cee::fail names the op for it), allocates its outputs, and runs a plain C++
// loop on the CPU or launches its kernels on torch's current stream. The same
// function is the op's meta kernel (torch.compile, FakeTensorMode): there it
// runs its checks and makes its outputs, and visit_dtype runs nothing. LibTorch
// stable ABI only, like the rest of the host code.
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <initializer_list>
#include <string>
#include <tuple>
#include <type_traits>

#include "cee_generated.h"
#include "host_float16.h"
#include "input_checks.h"
#include "launcher.h"
#include "new_tensors.h"
#include "torch_boundary.h"
#include "torch_cuda.h"
#include "torch_versions.h"

namespace cee {

// Where an op's kernel runs. Meta: the checks and outputs on the meta device,
// which is what torch.compile and FakeTensorMode run, so that every check is
// stated once, for real and fake tensors alike.
enum class Backend { Cpu, Cuda, Meta };

// The op this thread runs, and for which backend: set by the core around its
// host function (csrc/ops.cpp), so that launches find that op's kernels and a
// meta call computes nothing.
struct Running {
  const OpInfo* op = nullptr;
  Backend backend = Backend::Cpu;
};
inline Running& running() {
  static thread_local Running now;
  return now;
}
inline const OpInfo* running_op() { return running().op; }

// Sets the running op for the lifetime of this object, then restores the one
// before (an op's host function may call another op).
class RunningOp {
 public:
  RunningOp(const OpInfo* op, Backend backend) : saved_(running()) {
    running() = {op, backend};
  }
  ~RunningOp() { running() = saved_; }

 private:
  Running saved_;
};

// A scalar as a check's message shows it: a float in the fewest digits that
// read back as it, as Python prints it.
inline std::string scalar_string(double v) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    snprintf(text, sizeof text, "%.*g", digits, v);
    if (strtod(text, nullptr) == v) break;
  }
  return text;
}
inline std::string scalar_string(int64_t v) { return std::to_string(v); }
inline std::string scalar_string(bool v) { return v ? "True" : "False"; }

// The core's dtype index (CEE_DTYPE_FLOAT32, ...) of a host type.
template <typename T>
constexpr int dtype_of() {
#define CEE_DTYPE_OF(id, device_type, size, scalar_type, name) \
  if constexpr (std::is_same_v<T, HostType_##name>) return CEE_DTYPE_##id;
  CEE_FOR_EACH_DTYPE(CEE_DTYPE_OF)
#undef CEE_DTYPE_OF
  return -1;
}

// The dtype index of `t`, refused (naming `what`) unless the op declares it.
inline int op_dtype(const Tensor& t, const char* what) {
  const int dtype = dtype_index(t.scalar_type());
  if (dtype < 0 || !(running_op()->dtypes & (1u << dtype)))
    fail(std::string(what) + " is " + dtype_name(t.scalar_type()) +
         "; supported: " + dtype_names(running_op()->dtypes));
  return dtype;
}

// Calls f(T()) with T the host type of `dtype` (c10::Half, float, ...), for
// the dtypes of mask kDtypes only (bit d: the core's dtype d); on a meta call,
// nothing (there is no data to compute on). A host.h calls its folder's
// visit_dtype(dtype, f), which passes its declared dtypes: the typed part, with
// every data pointer and launch, goes in f.
template <unsigned kDtypes, typename F>
void visit_dtype(int dtype, F&& f) {
  if (running().backend == Backend::Meta) return;
#define CEE_VISIT(id, device_type, size, scalar_type, name) \
  if constexpr ((kDtypes >> CEE_DTYPE_##id) & 1u)           \
    if (dtype == CEE_DTYPE_##id) return f(HostType_##name());
  CEE_FOR_EACH_DTYPE(CEE_VISIT)
#undef CEE_VISIT
  fail("no host type for this dtype");
}

// A tensor read as [rows, cols] (cols: its last dimension), each row
// contiguous, row r starting at data + r * stride elements.
struct Rows {
  int64_t rows, cols, stride;
};

// `t` itself where its layout is such rows, else a contiguous copy of it
// (transposed or sliced views, expanded gradients): the kernels see rows only.
inline Tensor as_rows(const Tensor& t, Rows* out) {
  const int64_t nd = t.dim();
  out->cols = nd ? t.size(nd - 1) : 1;
  out->rows = 1;
  for (int64_t d = 0; d + 1 < nd; ++d) out->rows *= t.size(d);
  bool rows_ok = nd == 0 || t.size(nd - 1) <= 1 || t.stride(nd - 1) == 1;
  // The leading dimensions must collapse into one of stride `stride`.
  int64_t stride = out->cols, expected = -1;
  for (int64_t d = nd - 2; rows_ok && d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (expected < 0) stride = expected = t.stride(d);
    rows_ok = t.stride(d) == expected && expected >= out->cols;
    expected *= t.size(d);
  }
  if (rows_ok) {
    out->stride = stride;
    return t;
  }
  out->stride = out->cols;
  return torch_call("copying to a contiguous tensor",
                    [&] { return cee::contiguous(t); });
}

// Same device, or an error naming both tensors.
inline void check_same_device(const Tensor& a, const char* a_name,
                              const Tensor& b, const char* b_name) {
  if (a.device().type() != b.device().type() ||
      a.get_device_index() != b.get_device_index())
    fail(std::string(a_name) + " is on " + device_name(a.device()) + ", " +
         b_name + " on " + device_name(b.device()) +
         "; both must be on one device");
}

// The launches of the running op on `on`'s CUDA device, on torch's current
// stream there. Its kernels are named as ops.toml lists them: the template's
// name, then its parameters after the dtype, in order (a bool as 0 or 1).
class Launch {
 public:
  explicit Launch(const Tensor& on)
      : op_(running_op()),
        device_(on.get_device_index()),
        stream_(current_cuda_stream(on.get_device_index())) {}

  // The device's streaming multiprocessors: how many blocks fill it.
  int multiprocessors() const {
    const int n = cee_multiprocessor_count(device_);
    return n > 0 ? n : 1;
  }

  // How many blocks of `block` threads of kernel `name` (as for a launch),
  // with `shared_bytes` of dynamic shared memory, run at once on one
  // multiprocessor: a kernel over 64 registers a thread fits fewer than
  // 2048 / block, and a grid that loops over more blocks than fit runs a
  // second, mostly idle wave.
  int resident_blocks(const char* name, int dtype,
                      std::initializer_list<int> values, unsigned block,
                      unsigned shared_bytes) const {
    const int kernel = find(name, dtype, values);
    int blocks = 0;
    char err[1024] = {0};
    if (cee_resident_blocks(kernel, block, shared_bytes, device_, &blocks,
                            op_->qualname, err, sizeof err) != 0)
      throw std::runtime_error(err);  // already names the op
    return blocks > 0 ? blocks : 1;
  }

  // Launches kernel `name` of dtype `dtype` with `values`, on grid x block
  // threads with `shared_bytes` of dynamic shared memory. `args` are the
  // kernel's parameters, each of exactly the parameter's type.
  template <typename... Args>
  void operator()(const char* name, int dtype,
                  std::initializer_list<int> values, unsigned grid,
                  unsigned block, unsigned shared_bytes, Args... args) const {
    const int kernel = find(name, dtype, values);
    void* params[] = {static_cast<void*>(&args)...};
    char err[1024] = {0};
    if (cee_launch(kernel, grid, block, shared_bytes, params, device_, stream_,
                   op_->qualname, err, sizeof err) != 0)
      throw std::runtime_error(err);  // already names the op
  }

 private:
  int find(const char* name, int dtype,
           std::initializer_list<int> values) const {
    for (int k = 0; k < op_->num_kernels; ++k) {
      const KernelInstance& c = op_->kernels[k];
      if (c.dtype != dtype || c.num_values != (int)values.size() ||
          strcmp(c.name, name) != 0)
        continue;
      int i = 0;
      while (i < c.num_values && c.values[i] == values.begin()[i]) ++i;
      if (i == c.num_values) return c.index;
    }
    std::string wanted = std::string(name) + "<dtype " + std::to_string(dtype);
    for (int v : values) wanted += ", " + std::to_string(v);
    fail("no compiled kernel " + wanted +
         ">: add its values to the op's kernels in ops.toml");
  }

  const OpInfo* op_;
  int device_;
  void* stream_;
};

}  // namespace cee
