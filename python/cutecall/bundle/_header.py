"""Typed C++ headers for bundles: one inline function per entry.

``cutecall.export(path, kernels, header="kernels.h")`` (or ``cutecall export
OUT SOURCE --header kernels.h``) writes, beside the bundle, a header with
one function per entry in a namespace named after the file::

    namespace kernels {
    inline cutecall::Status vector_add(const cutecall::Bundle& bundle,
        cutecall::TensorRef<const float, 1> a,
        cutecall::TensorRef<const float, 1> b,
        cutecall::TensorRef<float, 1> out0, cudaStream_t stream);
    }

Inputs are ``TensorRef<const T, rank>``, outputs ``TensorRef<T, rank>``,
runtime scalars their C++ types (``float``, ``int32_t``, ``bool``...), in
the order the kernel declares them. A call with a wrong dtype, rank or
number of operands does not compile; extents, ``dims=`` ties and
divisibility are checked when it runs, by the same C++ code and with the
same messages as from Python. docs/cpp.md shows a program.
"""

from __future__ import annotations

import os
import re

from .._driver.call_record import CallRecord
from .._driver.plan import decode_plan

__all__ = ["header_text", "write_header"]

# JAX dtype name -> C++ element type (cutecall/tensor_ref.h for the rest).
_DTYPES = {
    "float32": "float", "float64": "double", "float16": "cutecall::float16_t",
    "bfloat16": "cutecall::bfloat16_t", "float8_e4m3fn": "cutecall::float8_e4m3fn_t",
    "float8_e5m2": "cutecall::float8_e5m2_t", "bool": "bool",
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
}
# CuTe DSL scalar type -> C++ parameter type.
_SCALARS = {
    "Float32": "float", "Float64": "double", "Boolean": "bool", "Int8": "int8_t",
    "Int16": "int16_t", "Int32": "int32_t", "Int64": "int64_t", "Uint8": "uint8_t",
    "Uint16": "uint16_t", "Uint32": "uint32_t", "Uint64": "uint64_t",
}
_KEYWORDS = {
    "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch",
    "char", "class", "const", "continue", "default", "delete", "do", "double",
    "else", "enum", "explicit", "export", "extern", "false", "float", "for",
    "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new",
    "not", "operator", "or", "private", "protected", "public", "register", "return",
    "short", "signed", "sizeof", "static", "struct", "switch", "template", "this",
    "throw", "true", "try", "typedef", "typename", "union", "unsigned", "using",
    "virtual", "void", "volatile", "while", "xor", "bundle", "stream",
}


def identifier(name: str) -> str:
    """A C++ identifier for `name` ('my-kernel.v2' -> 'my_kernel_v2')."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not out or out[0].isdigit():
        out = "_" + out
    return out + "_" if out in _KEYWORDS else out


def _elem_type(call: CallRecord, source: int, index: int, elem_bytes: int) -> str:
    c = call.contract
    if c is not None:
        dtype = (c.inputs[index][0] if source == 0 else c.outputs[index][0])
        if dtype in _DTYPES:
            return _DTYPES[dtype]
    return f"cutecall::Elem<{elem_bytes}>"


def _function(name: str, call: CallRecord, header: str) -> str:
    k = call.kernel
    ops = decode_plan(k.plan)
    names = k.operand_names.split(",") if k.operand_names else []
    num_args, num_rets, num_scalars = k.plan[1], k.plan[2], k.plan[4]
    by_flat: dict[int, tuple[dict, str]] = {}
    for i, op in enumerate(ops):
        flat = op["index"] if op["source"] == 0 else num_args + op["index"]
        by_flat[flat] = (op, names[i] if i < len(names) else "")
    if sorted(by_flat) != list(range(num_args + num_rets)):
        return (f"// {name}: not every input and output is a kernel tensor "
                "operand; call it through cutecall::Bundle::Find.\n")
    params, ins, outs, ranks, sizes, used = [], [], [], [], [], set()

    def unique(n: str) -> str:
        n = identifier(n)
        while n in used:
            n += "_"
        used.add(n)
        return n

    for flat in range(num_args + num_rets):
        op, op_name = by_flat[flat]
        is_in = flat < num_args
        elem = _elem_type(call, 0 if is_in else 1, op["index"], op["elem_bytes"])
        p = unique(op_name or (f"in{flat}" if is_in else f"out{flat - num_args}"))
        params.append(f"cutecall::TensorRef<{'const ' if is_in else ''}{elem}, "
                      f"{op['rank']}> {p}")
        (ins if is_in else outs).append(f"{p}.view()")
        ranks.append(str(op["rank"]))
        sizes.append(str(op["elem_bytes"]))
    scalars = []
    for j in range(num_scalars):
        s_name, s_type = call.scalars[j] if j < len(call.scalars) else ("", "?")
        p = unique(s_name or f"scalar{j}")
        if s_type in _SCALARS:
            params.append(f"{_SCALARS[s_type]} {p}")
            scalars.append(f"cutecall::typed_internal::Scalar<{_SCALARS[s_type]}>({p})")
        else:
            params.append(f"cutecall::abi::Slot {p}")
            scalars.append(p)
    symbols = f" Shared extents (dims=): {k.symbol_names}." if k.symbol_names else ""
    fn = identifier(name)

    return f"""
// Entry '{name}' (kernel {k.name}, {k.arch}).{symbols}
inline cutecall::Status {fn}(
    const cutecall::Bundle& bundle,
    {(','+chr(10)+'    ').join(params + ['cudaStream_t stream'])}) {{
  static constexpr int32_t kRanks[] = {{{', '.join(ranks)}}};
  static constexpr int32_t kElemBytes[] = {{{', '.join(sizes)}}};
  static constexpr cutecall::typed_internal::Expect kExpect{{
      "{header}", "{name}", kRanks, kElemBytes, {num_args}, {num_rets}, {num_scalars}}};
  thread_local cutecall::typed_internal::Cache cache;
{_array("cutecall::BufferView", "inputs", ins)}
{_array("cutecall::BufferView", "outputs", outs)}
{_array("cutecall::abi::Slot", "scalars", scalars)}
  return cutecall::typed_internal::Run(
      bundle, kExpect, cache, stream, {{inputs, {len(ins)}}},
      {{outputs, {len(outs)}}}, {{scalars, {len(scalars)}}});
}}
"""


def _array(type_: str, name: str, items: list[str]) -> str:
    if not items:
        return f"  const {type_}* {name} = nullptr;"
    one_line = f"  const {type_} {name}[] = {{{', '.join(items)}}};"
    if len(one_line) <= 88:
        return one_line
    return f"  const {type_} {name}[] = {{\n      " + ",\n      ".join(items) + "};"


def header_text(calls: dict[str, CallRecord], header_name: str,
                namespace: str | None = None, digest: str = "") -> str:
    """The header for `calls` (name -> CallRecord), namespace `namespace`
    (default: the header's file name without extension)."""
    ns = identifier(namespace or os.path.splitext(os.path.basename(header_name))[0])
    guard = "CUTECALL_GENERATED_" + identifier(os.path.basename(header_name)).upper()
    body = "".join(_function(n, calls[n], os.path.basename(header_name))
                   for n in sorted(calls))
    return f"""// {os.path.basename(header_name)}: typed C++ calls of the bundle with
// manifest-sha256 {digest or '?'}; written by cutecall.export. Do not edit.
// Link cutecall::core (find_package(cutecall); docs/cpp.md). Each function
// returns a cutecall::Status and launches on `stream` without synchronizing.
#ifndef {guard}
#define {guard}

#include <cstdint>

#include "cutecall/bundle.h"
#include "cutecall/tensor_ref.h"

#ifndef __CUDA_RUNTIME_H__
typedef struct CUstream_st* cudaStream_t;
#endif

namespace {ns} {{
{body}
}}  // namespace {ns}

#endif  // {guard}
"""


def write_header(path, calls: dict[str, CallRecord], digest: str = "",
                 namespace: str | None = None) -> str:
    """Writes the header atomically; returns its path."""
    path = os.path.abspath(os.fspath(path))
    text = header_text(calls, path, namespace, digest)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path
