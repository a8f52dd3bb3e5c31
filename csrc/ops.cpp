// The torch registrations of every declared op, from the generated list
// (cee_op_hosts.h, written by the build from ops/*/ops.toml): its schema and
// its no-grad twin's, and its host function (the core's
// elementwise one, or its own host.h) as both's CPU, CUDA and Meta kernel,
// boxed and guarded
// (torch_boundary.h), with the op set as the running one (host_api.h) and its
// declared scalar checks run first. Op-agnostic: a kernel author never edits
// this file. The LibTorch stable ABI's C registration, as its
// STABLE_TORCH_LIBRARY macros make it, written out so that what torch 2.10
// added (kernels registered with our ABI version) is used where the running
// torch has it (torch_versions.h).
#include <stdio.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

// clang-format off: first, the op table names ops by it
#include "op_namespace.h"
// clang-format on
#include "cee_generated.h"
#include "cee_op_hosts.h"
#include "torch_boundary.h"
#include "torch_versions.h"

namespace {

using namespace cee;

// One op's kernel for a backend: the running op set, its scalar checks, then
// its host function.
template <typename Host, const OpInfo* op, void (*check)(const StableIValue*),
          Backend kBackend>
void run_op(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  const RunningOp running(op, kBackend);
  check(stack);
  Host::template run<kBackend>(*op, stack, num_args, num_outputs);
}

#define CEE_BOXED(name, schema, twin)                       \
  template <Backend kBackend>                               \
  constexpr BoxedKernel boxed_##name =                      \
      &guarded<&run_op<cee_hosts::name, &cee_op_##name,     \
                       &cee_hosts::check_##name, kBackend>, \
               &cee_op_##name>;
CEE_FOR_EACH_OP(CEE_BOXED)
#undef CEE_BOXED

// A failed registration cannot raise (it runs while torch loads the library):
// it is printed, and the op is missing where Python looks for it.
void registered(AOTITorchError error, const char* what, const char* name) {
  if (error != AOTI_TORCH_SUCCESS)
    fprintf(stderr, "%s: could not register %s of %s\n", CEE_NAMESPACE_STR,
            what, name);
}

void define(TorchLibraryHandle library, const char* schema) {
  registered(aoti_torch_library_def(library, schema), "the schema", schema);
}

template <Backend kBackend>
void implement(TorchLibraryHandle library) {
  auto with_version = newer_torch().library_impl;
  auto impl = [&](const char* name, BoxedKernel kernel) {
    registered(with_version
                   ? with_version(library, name, kernel, TORCH_TARGET_VERSION)
                   : aoti_torch_library_impl(library, name, kernel),
               "a kernel", name);
  };
#define CEE_IMPL(name, schema, twin)   \
  impl(#name, boxed_##name<kBackend>); \
  impl("_" #name "_no_grad", boxed_##name<kBackend>);
  CEE_FOR_EACH_OP(CEE_IMPL)
#undef CEE_IMPL
}

// The registrations live as long as the library: torch removes them when the
// handles are deleted.
struct Registrations {
  TorchLibraryHandle def = nullptr, cpu = nullptr, cuda = nullptr,
                     meta = nullptr;

  Registrations() {
    registered(aoti_torch_library_init_def(CEE_NAMESPACE_STR, __FILE__,
                                           __LINE__, &def),
               "the library", CEE_NAMESPACE_STR);
    // Each op, then its no-grad twin: the same kernels, no autograd kernel
    // (torch's autograd fallback passes through), which the Python function
    // calls when no graph is built (cuda_ext_example/fast_path.py).
#define CEE_DEF(name, schema, twin) \
  define(def, schema);              \
  define(def, twin);
    CEE_FOR_EACH_OP(CEE_DEF)
#undef CEE_DEF
    init("CPU", &cpu);
    implement<Backend::Cpu>(cpu);
    init("CUDA", &cuda);
    implement<Backend::Cuda>(cuda);
    init("Meta", &meta);
    implement<Backend::Meta>(meta);
  }

  void init(const char* key, TorchLibraryHandle* library) {
    registered(aoti_torch_library_init_impl(CEE_NAMESPACE_STR, key, __FILE__,
                                            __LINE__, library),
               "the kernels for", key);
  }

  ~Registrations() {
    for (TorchLibraryHandle h : {meta, cuda, cpu, def})
      if (h) aoti_torch_delete_library_object(h);
  }
};

const Registrations registrations;

}  // namespace
