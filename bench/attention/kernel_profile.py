"""``python -m bench.attention.run --profile SHAPE``: one dense shape, each path's
kernels with their device time per call, and the tile configurations
each path's FA4 kernels were built with, so a gap between two paths can
be traced to a kernel and a config.

JAX paths (cutecall, fa4_jax, cudnn, xla): a JAX profiler trace of a chain
of calls in one ``jit`` (``bench/timing.py``: ``jax_kernel_table``); FA4's
torch path: ``torch.profiler`` over as many back-to-back calls.
"""

from __future__ import annotations

import re
import traceback

from bench.attention.paths import import_fa4_jax, jax_call, jax_inputs, torch_call, torch_inputs
from bench.timing import jax_kernel_table, torch_kernel_table


def configs(path: str, shape) -> dict:
    """The forward and backward tile configurations of a path's FA4
    kernels for the shape (cutecall and FA4's torch path both take FA4's
    ``_tile_size_fwd_sm90`` / ``_tile_size_bwd_sm90``; fa4-jax carries its
    own copy of those tables, from FA4 4.0.0b26)."""
    d, c = shape.d, shape.causal
    if path in ("cutecall", "fa4_torch"):
        from flash_attn.cute import interface
        return {"fwd": repr(interface._tile_size_fwd_sm90(d, d, c, False)),
                "bwd": repr(interface._tile_size_bwd_sm90(d, d, c, False))}
    if path == "fa4_jax":
        import_fa4_jax()
        from fa4_jax import kernels
        return {"fwd": repr(kernels._fwd_cfg_sm90(d, d, c, False)),
                "bwd": repr(kernels._bwd_cfg_sm90(d, d, c, False))}
    return {}


def short_name(name: str, width: int = 96) -> str:
    """A kernel's name cut to ``width``: CuTe DSL symbols spell out their
    arguments after the kernel's class and method names."""
    name = re.sub(r"^kernel_cutlass_(kernel_)?", "", name)
    return name if len(name) <= width else name[: width - 1] + "…"


def profile(shape, mode: str, paths, calls: int) -> dict:
    """``{path: {"config", "kernels", "span_us", "busy_us"} or {"error"}}``
    for one shape and pass, and the table printed."""
    x = jax_inputs(shape, padded=False)
    t = torch_inputs(x) if "fa4_torch" in paths else None
    out = {}
    for path in paths:
        try:
            if path == "fa4_torch":
                table = torch_kernel_table(torch_call(shape, mode, t), calls)
            else:
                fn, args = jax_call(path, shape, mode, x)
                table = jax_kernel_table(fn, args, calls)
            table["config"] = configs(path, shape)
            out[path] = table
        except Exception as e:  # noqa: BLE001 (recorded; the other paths go on)
            out[path] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            traceback.print_exc(limit=2, chain=False)
    print(f"\n== profile: {shape.label()} {mode}, µs per call ({calls} calls traced)")
    for path, table in out.items():
        if "error" in table:
            print(f"\n-- {path}: {table['error']}")
            continue
        print(f"\n-- {path}: span {table['span_us']:.1f} µs, kernels busy "
              f"{table['busy_us']:.1f} µs")
        for key, cfg in table["config"].items():
            print(f"   {key} config: {cfg}")
        for k in table["kernels"]:
            print(f"   {k['us']:9.1f} µs  x{k['launches']:<4g} {short_name(k['name'])}")
    return out
