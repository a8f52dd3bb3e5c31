// torch's current CUDA stream, for every op that launches
// (csrc/elementwise_host.h, csrc/host_api.h). At stable-ABI target 2.9 there is
// no stable shim for it; aoti_torch_get_current_cuda_stream lives in
// libtorch_cuda.so (torch_cuda.dll on Windows), which torch loads privately
// (RTLD_LOCAL), so it is looked up in that library by name
// (csrc/dynamic_loader.h). A CPU-only torch has no such library: that is an
// error at call time, never at import.
#pragma once
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include "dynamic_loader.h"
#include "torch_boundary.h"

namespace cee {

using GetCurrentCudaStream = AOTITorchError (*)(int32_t, void**);

// Looked up once (a function-local static: initialized by one thread, only
// read after), as torch has loaded its CUDA library by the time it loads ours.
inline GetCurrentCudaStream find_current_stream_getter() {
  static const GetCurrentCudaStream getter =
      reinterpret_cast<GetCurrentCudaStream>(loaded_library_symbol(
          CEE_TORCH_CUDA_LIBRARY, "aoti_torch_get_current_cuda_stream"));
  return getter;
}

inline GetCurrentCudaStream require_cuda_torch() {
  GetCurrentCudaStream get_stream = find_current_stream_getter();
  if (!get_stream)
    fail(
        "got CUDA tensors, but the running torch has no CUDA support "
        "(" CEE_TORCH_CUDA_LIBRARY
        " is not loaded); install a CUDA build of torch");
  return get_stream;
}

// torch's current stream of CUDA device `device`.
inline void* current_cuda_stream(int32_t device) {
  void* stream = nullptr;
  if (require_cuda_torch()(device, &stream) != AOTI_TORCH_SUCCESS)
    torch_call_failed("getting torch's current CUDA stream");
  return stream;
}

}  // namespace cee
