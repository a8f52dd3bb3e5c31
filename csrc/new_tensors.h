// New output tensors for the host code of every op: contiguous, through
// aoti_torch_empty_strided, which calls at::empty_strided directly (a boxed
// dispatcher call, torch::stable::new_empty, costs microseconds per op, which
// launch-bound callers notice).
#pragma once
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/tensor.h>

#include <initializer_list>

#include "cee_generated.h"
#include "torch_boundary.h"

namespace cee {

// A new contiguous tensor of `sizes` and dtype (the core's index; -1: like's),
// on like's device.
inline torch::stable::Tensor new_empty(const torch::stable::Tensor& like,
                                       const int64_t* sizes, int64_t ndim,
                                       int dtype = -1) {
  int64_t strides[64];
  int64_t stride = 1;
  for (int64_t d = ndim - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= sizes[d] > 1 ? sizes[d] : 1;
  }
  int32_t code = 0, device_type = 0;
  if (dtype < 0) {
    if (aoti_torch_get_dtype(like.get(), &code) != AOTI_TORCH_SUCCESS)
      torch_call_failed("reading a dtype");
  }
#define CEE_DTYPE_CODE(id, device_type, size, scalar_type, name) \
  if (dtype == CEE_DTYPE_##id) code = aoti_torch_dtype_##name();
  CEE_FOR_EACH_DTYPE(CEE_DTYPE_CODE)
#undef CEE_DTYPE_CODE
  AtenTensorHandle handle = nullptr;
  if (aoti_torch_get_device_type(like.get(), &device_type) !=
          AOTI_TORCH_SUCCESS ||
      aoti_torch_empty_strided(ndim, sizes, strides, code, device_type,
                               like.get_device_index(),
                               &handle) != AOTI_TORCH_SUCCESS)
    torch_call_failed("allocating the output");
  return torch::stable::Tensor(handle);
}

inline torch::stable::Tensor new_empty(const torch::stable::Tensor& like,
                                       std::initializer_list<int64_t> sizes,
                                       int dtype = -1) {
  return new_empty(like, sizes.begin(), (int64_t)sizes.size(), dtype);
}

// A new contiguous tensor of like's shape, dtype and device.
inline torch::stable::Tensor new_empty_like(const torch::stable::Tensor& like) {
  int64_t sizes[64];
  for (int64_t d = 0; d < like.dim(); ++d) sizes[d] = like.size(d);
  return new_empty(like, sizes, like.dim());
}

}  // namespace cee
