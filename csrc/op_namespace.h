// The op namespace, torch.ops.<namespace>: cuda_ext_example, or another that
// the JIT build (scripts/jit/loader.py) passes, so that its ops load next to
// the installed wheel's. Included before the op table, which names ops by it.
#pragma once
#ifndef CEE_NAMESPACE
#define CEE_NAMESPACE cuda_ext_example
#endif
#define CEE_STR2(x) #x
#define CEE_STR(x) CEE_STR2(x)
#define CEE_NAMESPACE_STR CEE_STR(CEE_NAMESPACE)
