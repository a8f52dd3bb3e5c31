// The torch registrations of the ops that are not elementwise (kind =
// "custom" in ops/<folder>/ops.toml): each op's schema, and its host function
// (ops/<folder>/host.h) as its CPU and CUDA kernel, boxed by the stable ABI's
// TORCH_BOX and guarded like the elementwise ops (torch_boundary.h). Their
// fake kernels and autograd are registered from Python (cuda_ext_example/
// custom_ops.py), from the same declarations. Op-agnostic: a kernel author
// never edits this file.
#include <torch/csrc/stable/library.h>

// clang-format off: first, the op table names ops by it
#include "op_namespace.h"
// clang-format on
#include "cee_custom_hosts.h"
#include "cee_generated.h"

namespace {

using namespace cee;

// The host function, with its op set as this thread's running op (the
// launches find its kernels by it), restored afterwards.
template <auto function, const CustomOpInfo* op>
void run_custom(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  struct Running {
    const CustomOpInfo* saved = running_op();
    Running() { running_op() = op; }
    ~Running() { running_op() = saved; }
  } running;
  TORCH_BOX(function)(stack, num_args, num_outputs);
}

#define CEE_CUSTOM_BOXED(name, folder, function, schema)                \
  constexpr BoxedKernel boxed_custom_##name = &guarded<                 \
      &run_custom<&cee_rule_##folder::function, &cee_custom_op_##name>, \
      &cee_custom_op_##name>;
CEE_FOR_EACH_CUSTOM_OP(CEE_CUSTOM_BOXED)
#undef CEE_CUSTOM_BOXED

void register_custom_kernels(torch::stable::detail::StableLibrary& m) {
#define CEE_CUSTOM_IMPL(name, folder, function, schema) \
  m.impl(#name, boxed_custom_##name);
  CEE_FOR_EACH_CUSTOM_OP(CEE_CUSTOM_IMPL)
#undef CEE_CUSTOM_IMPL
  (void)m;
}

}  // namespace

STABLE_TORCH_LIBRARY_FRAGMENT(CEE_NAMESPACE, m) {
#define CEE_CUSTOM_DEF(name, folder, function, schema) m.def(schema);
  CEE_FOR_EACH_CUSTOM_OP(CEE_CUSTOM_DEF)
#undef CEE_CUSTOM_DEF
  (void)m;
}
STABLE_TORCH_LIBRARY_IMPL(CEE_NAMESPACE, CPU, m) { register_custom_kernels(m); }
STABLE_TORCH_LIBRARY_IMPL(CEE_NAMESPACE, CUDA, m) {
  register_custom_kernels(m);
}
