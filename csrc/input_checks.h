// The input rules every op states to its caller, in the op's own input names
// and Python's spelling of dtypes and devices.
#pragma once
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <string>

#include "torch_boundary.h"
#include "torch_versions.h"

namespace cee {

using torch::headeronly::ScalarType;
using torch::stable::Device;
using torch::stable::Tensor;

inline std::string device_name(const Device& device) {
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
inline std::string dtype_name(ScalarType t) {
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

inline std::string shape_string(const Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d) s += ", ";
    s += std::to_string(t.size(d));
  }
  return s + "]";
}

// The core's dtype index of a torch dtype (cee_generated.h), or -1.
inline int dtype_index(ScalarType t) {
  switch (t) {
#define CEE_DTYPE_CASE(id, device_type, size, scalar_type, name) \
  case ScalarType::scalar_type: return CEE_DTYPE_##id;
    CEE_FOR_EACH_DTYPE(CEE_DTYPE_CASE)
#undef CEE_DTYPE_CASE
    default: return -1;
  }
}

inline bool op_has_dtype(const cee::OpInfo& op, int dtype) {
  return dtype >= 0 && ((op.dtypes >> dtype) & 1u);
}

// "torch.float32, torch.bfloat16": the dtypes of `mask` (bit d: the core's
// dtype d), as an error lists what an op supports.
inline std::string dtype_names(unsigned mask) {
  static const char* const names[] = {
#define CEE_DTYPE_NAME(id, device_type, size, scalar_type, name) "torch." #name,
      CEE_FOR_EACH_DTYPE(CEE_DTYPE_NAME)
#undef CEE_DTYPE_NAME
  };
  std::string out;
  for (int d = 0; d < CEE_NUM_DTYPES; ++d)
    if (mask & (1u << d))
      out += (out.empty() ? "" : ", ") + std::string(names[d]);
  return out;
}

inline std::string supported_dtypes(const cee::OpInfo& op) {
  return dtype_names(op.dtypes);
}

// A call's output shape: the inputs' shapes broadcast as torch's elementwise
// ops do.
struct Shape {
  int64_t ndim = 0;
  int64_t sizes[64] = {};  // torch caps tensors at 64 dimensions
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
  bool equals(const Tensor& t) const {
    if (t.dim() != ndim) return false;
    for (int64_t d = 0; d < ndim; ++d)
      if (t.size(d) != sizes[d]) return false;
    return true;
  }
  std::string str() const {
    std::string s = "[";
    for (int64_t d = 0; d < ndim; ++d)
      s += (d ? ", " : "") + std::to_string(sizes[d]);
    return s + "]";
  }
};

// The bytes a tensor's elements span, [first, last], for the overlap rules.
inline void byte_span(const Tensor& t, uintptr_t* first, uintptr_t* last) {
  int64_t extent = 0;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1) extent += (t.size(d) - 1) * t.stride(d);
  *first = (uintptr_t)const_data(t);
  *last = *first + (extent + 1) * t.element_size() - 1;
}

inline bool same_view(const Tensor& a, const Tensor& b) {
  if (const_data(a) != const_data(b) || a.dim() != b.dim()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) != b.size(d) || (a.size(d) > 1 && a.stride(d) != b.stride(d)))
      return false;
  return true;
}

// The input rules of every elementwise op, said in the op's own input names:
// its meta kernel runs them too, so torch.compile and FakeTensorMode get the
// same errors. Returns the core's dtype index; the output shape in `shape`.
// `fake`: the meta kernel's call (fake tensors have no memory to compare).
template <int N>
int check_inputs(const cee::OpInfo& info, const Tensor (&in)[N], Shape* shape,
                 bool fake) {
  const cee::ElementwiseInfo& op = *info.elementwise;
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
  if (!op_has_dtype(info, dtype))
    fail("unsupported dtype " + dtype_name(in[0].scalar_type()) +
         "; supported: " + supported_dtypes(info));
  // Broadcasting: sizes aligned from the last dimension; 1 stretches.
  shape->ndim = 0;
  for (int k = 0; k < N; ++k)
    if (in[k].dim() > shape->ndim) shape->ndim = in[k].dim();
  for (int64_t d = 0; d < shape->ndim; ++d) shape->sizes[d] = 1;
  for (int k = 0; k < N; ++k)
    for (int64_t d = in[k].dim() - 1; d >= 0;
         --d) {  // the last first, as torch
      const int64_t at = shape->ndim - in[k].dim() + d;
      const int64_t size = in[k].size(d);
      if (size == shape->sizes[at] || size == 1) continue;
      if (shape->sizes[at] != 1)
        fail("the shapes do not broadcast: " + first + " " +
             shape_string(in[0]) + " and " + op.inputs[k] + " " +
             shape_string(in[k]) + " differ at dimension " +
             std::to_string(at - shape->ndim) + " (sizes must be equal or 1)");
      shape->sizes[at] = size;
    }
  for (int k = 0; k < N; ++k) {
    if (!(op.mutated & (1u << k))) continue;
    const std::string name = op.inputs[k];
    if (!shape->equals(in[k]))
      fail(name + " is updated in place, so it must have the call's shape " +
           shape->str() + ", got " + shape_string(in[k]));
    for (int64_t d = 0; d < in[k].dim(); ++d)
      if (in[k].size(d) > 1 && in[k].stride(d) == 0)
        fail(name +
             " is updated in place but several of its elements share memory "
             "(an expanded view); pass a tensor that owns its elements");
    if (fake || shape->numel() == 0) continue;
    uintptr_t lo, hi;
    byte_span(in[k], &lo, &hi);
    for (int j = 0; j < N; ++j) {
      if (j == k || in[j].numel() == 0) continue;
      uintptr_t lo2, hi2;
      byte_span(in[j], &lo2, &hi2);
      if (lo <= hi2 && lo2 <= hi && !same_view(in[k], in[j]))
        fail(name + " is updated in place and partly overlaps " + op.inputs[j] +
             " in memory; pass separate tensors (or the same one)");
    }
  }
  return dtype;
}

}  // namespace cee
