// The exception boundary between our C++ and torch's. Our static libc++ is
// not torch's, so no C++ exception may cross into libtorch: `guarded` wraps
// every op, catches everything and hands the message to torch's C shim
// `aoti_torch_check`, which throws a c10::Error from inside libtorch (Python
// sees a RuntimeError naming the op). A torch call that fails inside an op is
// named by `torch_call_failed`, with torch's own words where torch has them.
#pragma once
// Functions defined here are inline: any number of files may include it.
#include <stdio.h>
#include <string.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>

#include <exception>
#include <stdexcept>
#include <string>

#include "dynamic_loader.h"

namespace cee {

[[noreturn]] inline void fail(const std::string& message) {
  throw std::runtime_error(message);
}

// A failed torch call says so in these words: the Python side
// (cuda_ext_example/torch_errors.py) then replays that torch work with torch's
// public API, which raises torch's own exception (torch.OutOfMemoryError, ...).
constexpr const char* kTorchCallFailed = "torch call failed (";

// torch's own message for the last shim call that failed on this thread. The
// shim that hands it over arrived in torch 2.13; this build targets 2.10, so it
// is looked up at run time and is absent (nullptr) on torch 2.10 .. 2.12.
inline const char* torch_last_error() {
  using GetWhat = const char* (*)();
  static const GetWhat get_what = [] {
    return reinterpret_cast<GetWhat>(cee::loaded_library_symbol(
        CEE_TORCH_CPU_LIBRARY, "torch_exception_get_what_without_backtrace"));
  }();
  return get_what ? get_what() : nullptr;
}

[[noreturn]] inline void torch_call_failed(const char* what) {
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

using BoxedKernel = void (*)(StableIValue*, uint64_t, uint64_t);

// Runs a boxed kernel; returns false with the message in `message` if it threw.
// Everything with a destructor lives and dies inside this function.
__attribute__((noinline)) inline bool run_catching(
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
// `op`: the op's OpInfo or CustomOpInfo (for its qualname).
template <BoxedKernel kernel, auto op>
void guarded(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  char message[2048];
  if (run_catching(kernel, stack, num_args, num_outputs, op->qualname, message,
                   sizeof message))
    return;
  aoti_torch_check(false, op->qualname, __FILE__, __LINE__, message);
}

}  // namespace cee
