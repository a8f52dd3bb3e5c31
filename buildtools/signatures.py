"""The C++ adapter between the core's generic kernels and a rule's own apply.

A rule is written as its declaration reads: `apply(C a, C b, C alpha)` returns the output;
an input it updates in place comes as `C&`; with several outputs, they come as `C&` after
the inputs (and apply returns nothing); the scalars come last, in the dtype's compute type
C (bool for a bool). Each rule folder gets a generated `Signature` struct that says this to
the kernels (csrc/elementwise_kernels.cuh, csrc/cpu_kernels.h): the number of inputs and
outputs, which inputs are written back, the dtypes, the scalars' struct, and `element`,
the one call of the rule. The rule's header is included inside a namespace of its folder's
own (cee_rule_<folder>), so helpers of two rules never collide.
"""

from __future__ import annotations

from .declarations import Argument, Op


def _dtype_mask(op: Op, core_dtypes: list[str]) -> int:
    return sum(1 << i for i, d in enumerate(core_dtypes) if d in op.dtypes)


def _scalar_value(scalar: Argument, index: int) -> str:
    if scalar.type == "float":
        return f"(C)v.real[{index}]"
    if scalar.type == "int":
        return f"(C)v.integer[{index}]"
    return f"v.integer[{index}] != 0"


def _double_value(scalar: Argument, index: int) -> str:
    if scalar.type == "float":
        return f"v.real[{index}]"
    if scalar.type == "int":
        return f"(double)v.integer[{index}]"
    return f"v.integer[{index}] != 0"


def signature(op: Op, core_dtypes: list[str]) -> str:
    """The Signature struct of op's rule folder (C++, inside cee_rule_<folder>)."""
    n, m = len(op.inputs), len(op.outputs)
    mutated = sum(1 << k for k, name in enumerate(op.inputs) if name in op.mutates)
    fields = [f"{'bool' if s.type == 'bool' else 'C'} {s.name};" for s in op.scalars]
    fields += [f"C {name};  // derived: {expr}" for name, expr in op.derived.items()]
    converts = [f"s.{s.name} = {_scalar_value(s, i)};" for i, s in enumerate(op.scalars)]
    if op.derived:
        # The derived scalars, in double from the declared values, once per call.
        converts += [
            f"const {'bool' if s.type == 'bool' else 'double'} {s.name} = "
            f"{_double_value(s, i)};  (void){s.name};"
            for i, s in enumerate(op.scalars)
        ]
        converts += [f"s.{name} = (C)({expr});" for name, expr in op.derived.items()]
    args = [f"v[{k}]" for k in range(n)]
    if m > 1:
        args += [f"o[{j}]" for j in range(m)]
    args += [f"s.{s.name}" for s in op.scalars] + [f"s.{name}" for name in op.derived]
    call = f"{op.rule}::apply({', '.join(args)})"
    body = f"o[0] = {call};" if m == 1 else f"{call};"
    return "\n".join(
        [
            "struct Signature {",
            f"  static constexpr int kInputs = {n};",
            f"  static constexpr int kOutputs = {m};",
            f"  static constexpr unsigned kMutated = {mutated}u;  // bit k: input k written back",
            f"  static constexpr unsigned kDtypes = {_dtype_mask(op, core_dtypes)}u;  "
            "// bit d: the core's dtype d",
            "  template <typename C>",
            "  struct Scalars {",
            *(f"    {f}" for f in fields or ["char none;  // no scalar arguments"]),
            "  };",
            "  template <typename C>",
            "  CEE_HOST_DEVICE static Scalars<C> scalars(const cee::ScalarValues& v) {",
            "    Scalars<C> s = {};",
            *(f"    {c}" for c in converts),
            "    (void)v;",
            "    return s;",
            "  }",
            "  template <typename C>",
            f"  CEE_HOST_DEVICE static void element(C (&v)[{n}], C (&o)[{max(m, 1)}],",
            "                                      const Scalars<C>& s) {",
            f"    {body}",
            "    (void)o;",
            "    (void)s;",
            "  }",
            "};",
        ]
    )


def rules_source(declared: list[Op], core_dtypes: list[str]) -> str:
    """Every rule folder's header, each in its own namespace, with its Signature: what
    both the device code and the host code include."""
    by_folder = {}
    for op in declared:
        by_folder.setdefault(op.folder, op)
    parts = ['#include "elementwise_args.h"']
    for folder, op in sorted(by_folder.items()):
        parts += [
            f"namespace cee_rule_{folder} {{",
            f'#include "{op.folder}/rule.h"',
            signature(op, core_dtypes),
            f"}}  // namespace cee_rule_{folder}",
        ]
    return "\n".join(parts) + "\n"
