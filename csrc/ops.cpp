// The torch registrations of every declared op, from the generated list
// (cee_op_hosts.h, written by the build from ops/*/ops.toml): its schema, and
// its host function (the core's elementwise one, or its own host.h) as its CPU,
// CUDA and Meta kernel, boxed and guarded (torch_boundary.h), with the op set
// as the running one (host_api.h) and its declared scalar checks run first.
// Op-agnostic: a kernel author never edits this file. Uses only the LibTorch
// stable ABI (TORCH_TARGET_VERSION 2.10), so one binary loads on every torch
// >= 2.10. Built by zig (clang + its own static libc++) against glibc 2.17.
#include <torch/csrc/stable/library.h>

// clang-format off: first, the op table names ops by it
#include "op_namespace.h"
// clang-format on
#include "cee_generated.h"
#include "cee_op_hosts.h"
#include "torch_boundary.h"

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

#define CEE_BOXED(name, schema, tags)                                      \
  template <Backend kBackend>                                              \
  constexpr BoxedKernel boxed_##name =                                     \
      &guarded<&run_op<cee_hosts::name, &cee_op_##name,                    \
                       &cee_hosts::check_##name, kBackend>,                \
               &cee_op_##name>;
CEE_FOR_EACH_OP(CEE_BOXED)
#undef CEE_BOXED

template <Backend kBackend>
void register_kernels(torch::stable::detail::StableLibrary& m) {
#define CEE_IMPL(name, schema, tags) m.impl(#name, boxed_##name<kBackend>);
  CEE_FOR_EACH_OP(CEE_IMPL)
#undef CEE_IMPL
}

}  // namespace

STABLE_TORCH_LIBRARY(CEE_NAMESPACE, m) {
#define CEE_DEF(name, schema, tags) m.def(schema);
  CEE_FOR_EACH_OP(CEE_DEF)
#undef CEE_DEF
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
