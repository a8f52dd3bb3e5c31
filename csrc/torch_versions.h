// What the host code takes from a torch newer than the 2.9 it is built for,
// where the running torch has it, with what torch 2.9 offers otherwise: the
// build targets the LibTorch stable ABI of torch 2.9 (TORCH_TARGET_VERSION),
// so the library links only functions torch 2.9 exports and loads on every
// torch >= 2.9; what later releases added is looked up by name at run time.
// Each lookup is made once (a function-local static: thread-safe, no shared
// state written after it).
#pragma once
#include <stdint.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include "dynamic_loader.h"
#include "torch_boundary.h"

namespace cee {

// The functions torch added after 2.9 that the host code uses, or nullptr.
struct NewerTorch {
  // 2.10: data pointers that say what they are for (a const one needs no
  // copy-on-write materialization), torch's intra-op thread pool, kernel
  // registration with the caller's ABI version.
  AOTITorchError (*const_data_ptr)(AtenTensorHandle, const void**);
  AOTITorchError (*mutable_data_ptr)(AtenTensorHandle, void**);
  AOTITorchError (*parallel_for)(int64_t, int64_t, int64_t,
                                 void (*)(int64_t, int64_t, void*), void*);
  AOTITorchError (*library_impl)(TorchLibraryHandle, const char*,
                                 void (*)(StableIValue*, uint64_t, uint64_t),
                                 uint64_t);
};

inline const NewerTorch& newer_torch() {
  static const NewerTorch found = [] {
    auto find = [](const char* name) {
      return loaded_library_symbol(CEE_TORCH_CPU_LIBRARY, name);
    };
    NewerTorch f;
    f.const_data_ptr = reinterpret_cast<decltype(f.const_data_ptr)>(
        find("torch_get_const_data_ptr"));
    f.mutable_data_ptr = reinterpret_cast<decltype(f.mutable_data_ptr)>(
        find("torch_get_mutable_data_ptr"));
    f.parallel_for =
        reinterpret_cast<decltype(f.parallel_for)>(find("torch_parallel_for"));
    f.library_impl =
        reinterpret_cast<decltype(f.library_impl)>(find("torch_library_impl"));
    return f;
  }();
  return found;
}

// The data of a tensor the op reads, and of one it writes.
template <typename T = void>
const T* const_data(const torch::stable::Tensor& t) {
  const void* data = nullptr;
  AOTITorchError error;
  if (auto get = newer_torch().const_data_ptr) {
    error = get(t.get(), &data);
  } else {
    void* mutable_data = nullptr;
    error = aoti_torch_get_data_ptr(t.get(), &mutable_data);
    data = mutable_data;
  }
  if (error != AOTI_TORCH_SUCCESS) torch_call_failed("reading a data pointer");
  return static_cast<const T*>(data);
}

template <typename T = void>
T* mutable_data(const torch::stable::Tensor& t) {
  void* data = nullptr;
  auto get = newer_torch().mutable_data_ptr;
  if ((get ? get(t.get(), &data) : aoti_torch_get_data_ptr(t.get(), &data)) !=
      AOTI_TORCH_SUCCESS)
    torch_call_failed("reading a data pointer");
  return static_cast<T*>(data);
}

// f(begin, end) over [begin, end) in chunks of at least `grain`, in torch's
// intra-op thread pool (torch >= 2.10), else on this thread. f runs inside
// torch's pool: it must never throw.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (begin >= end) return;
  auto run = newer_torch().parallel_for;
  if (!run) return f(begin, end);
  auto chunk = [](int64_t b, int64_t e, void* context) {
    (*static_cast<const F*>(context))(b, e);
  };
  if (run(begin, end, grain, chunk, const_cast<F*>(&f)) != AOTI_TORCH_SUCCESS)
    torch_call_failed("running torch's thread pool");
}

// A contiguous copy of t (or t itself where it is contiguous): a new tensor
// and aten::copy_, both in torch 2.9.
inline torch::stable::Tensor contiguous(const torch::stable::Tensor& t) {
  if (t.is_contiguous()) return t;
  int64_t sizes[64], strides[64], stride = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    sizes[d] = t.size(d);
    strides[d] = stride;
    stride *= sizes[d] > 1 ? sizes[d] : 1;
  }
  int32_t dtype = 0, device_type = 0;
  AtenTensorHandle handle = nullptr;
  if (aoti_torch_get_dtype(t.get(), &dtype) != AOTI_TORCH_SUCCESS ||
      aoti_torch_get_device_type(t.get(), &device_type) != AOTI_TORCH_SUCCESS ||
      aoti_torch_empty_strided(t.dim(), sizes, strides, dtype, device_type,
                               t.get_device_index(),
                               &handle) != AOTI_TORCH_SUCCESS)
    torch_call_failed("allocating a contiguous copy");
  torch::stable::Tensor copy(handle);
  torch_call("copying to a contiguous tensor",
             [&] { torch::stable::copy_(copy, t); });
  return copy;
}

}  // namespace cee
