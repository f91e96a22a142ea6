#!/usr/bin/env python3
"""cuDNN's sm90 block-sparse attention: cutecall's JAX path against cuDNN's
own torch path, forward and backward, at ``cudnn_bsa_corpus.SHAPES['bench']``
(B 2, H 16, S 4096, D 128, 8 of 32 key blocks per query block, bf16).

  path        cutecall JAX                              cuDNN torch
  fwd         ``block_sparse_attention(q, k, v, i, n)``   ``_bsa_attn_fwd_sm90_blk128``
  bwd         the custom VJP's backward (``block_sparse_  ``_bsa_attn_bwd_sm90_blk128``
              kernels.backward``: CSR build, workspace,   (the same three steps)
              cuDNN's backward kernel)
  fwd+bwd     ``jax.vjp`` pulled back with dO            fwd, then bwd with its o, lse
  grad        ``jax.grad`` of ``o.astype(f32).sum()``    (none: the sum is JAX's own)

Timing. torch: CUDA events around 30 launches after a warm-up. JAX: the
wall time of a 20-call chain in one ``jit`` minus a 10-call one, divided by
10 (``bench/timing.jax_chain``: every call's outputs kept, an optimization
barrier between calls, so no call is merged or dropped; JAX's dispatch
cancels out). Each number is the median of ``--rounds`` rounds, the paths
interleaved in every round. The same inputs cross by DLPack, and the
largest differences of o (forward) and dq (backward, from the same o, lse
and dO) between the paths are recorded.

  python bench/external/bsa_grad.py --out DIR          # one GPU (H100/H200)
  python bench/external/bsa_grad.py --dry-run          # CPU: every JAX program
                                                       # lowered for sm_90a
Run it through ``bench/external/device_bsa_grad.sh`` (a hard cap). Writes
``DIR/bsa_grad.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCH)
import harness  # noqa: E402

harness.use_corpus()
from corpus import cudnn_bsa_corpus as bc  # noqa: E402
from timing import chain_wall_us, jax_chain, torch_device_us  # noqa: E402

PATHS = ("fwd", "bwd", "fwd+bwd", "grad")
K1, K2, LAUNCHES = 10, 20, 30


def jax_programs(b, h, s, d, count):
    """{path: (call, argument names)} of cutecall's JAX path."""
    import jax
    import jax.numpy as jnp

    from cutecall.attention import block_sparse as bs
    from cutecall.attention import block_sparse_kernels as bk
    from cutecall.attention import block_sparse_attention
    scale = d ** -0.5
    x = jax.ShapeDtypeStruct((b, h, s, d), jnp.bfloat16)
    idx = jax.ShapeDtypeStruct((b, h, s // bc.BLOCK, count), jnp.int32)
    config, _ = bs._check(x, x, x, idx, count, scale, "bhsd", None)

    def fwd(q, k, v, i):
        return block_sparse_attention(q, k, v, i, count, scale=scale)

    def bwd(q, k, v, o, lse, i, do):
        return bk.backward(config, q, k, v, o, lse, i, do, scale)

    def fwd_bwd(q, k, v, i, do):
        _, pull = jax.vjp(lambda q, k, v: fwd(q, k, v, i), q, k, v)
        return pull(do)

    def grad(q, k, v, i):
        return jax.grad(lambda q, k, v: fwd(q, k, v, i).astype(jnp.float32).sum(),
                        argnums=(0, 1, 2))(q, k, v)

    def forward_lse(q, k, v, i):  # o and lse, as the backward takes them
        return bk.forward(config)(q, k, v, i, scale)
    return {"fwd": (fwd, "q k v i"), "bwd": (bwd, "q k v o lse i do"),
            "fwd+bwd": (fwd_bwd, "q k v i do"), "grad": (grad, "q k v i"),
            "lse": (forward_lse, "q k v i")}


def torch_paths(tensors, count):
    """{path: a function launching cuDNN's torch path once}."""
    interface = importlib.import_module(bc.INTERFACE)
    fwd, bwd = interface._bsa_attn_fwd_sm90_blk128, interface._bsa_attn_bwd_sm90_blk128
    q, k, v, i, do = (tensors[n] for n in ("q", "k", "v", "i", "do"))
    o, lse = fwd(q, k, v, i, count)
    return {"fwd": lambda: fwd(q, k, v, i, count),
            "bwd": lambda: bwd(do, q, k, v, o, lse, i, count),
            "fwd+bwd": lambda: bwd(do, q, k, v, *fwd(q, k, v, i, count), i, count)}, (o, lse)


def dry_run(b, h, s, d, count) -> dict:
    """Every JAX program (a K1-call chain) lowered for sm_90a on this
    machine, and cuDNN's torch entry points checked against the calls made."""
    import jax
    import jax.numpy as jnp
    shapes = {"q": (b, h, s, d), "k": (b, h, s, d), "v": (b, h, s, d), "o": (b, h, s, d),
              "do": (b, h, s, d), "lse": (b, h, s), "i": (b, h, s // bc.BLOCK, count)}
    dtypes = {"lse": jnp.float32, "i": jnp.int32}
    found = {}
    for path, (call, names) in jax_programs(b, h, s, d, count).items():
        args = [jax.ShapeDtypeStruct(shapes[n], dtypes.get(n, jnp.bfloat16))
                for n in names.split()]
        t = time.perf_counter()
        runner = jax_chain(call, args, 2)
        text = runner.jitted.trace(*runner.arrays).lower(
            lowering_platforms=("cuda",)).as_text()
        found[path] = {"cutecall_calls_in_text": text.count("@cutecall_call"),
                       "lower_s": round(time.perf_counter() - t, 2)}
        harness.log(f"dry-run: {path}: {found[path]}")
    interface = importlib.import_module(bc.INTERFACE)
    inspect.signature(interface._bsa_attn_fwd_sm90_blk128).bind("q", "k", "v", "i", count)
    inspect.signature(interface._bsa_attn_bwd_sm90_blk128).bind(
        "do", "q", "k", "v", "o", "lse", "i", count)
    return found


def inputs(b, h, s, d, count):
    """(torch tensors, the same values as JAX arrays), by name."""
    import jax.numpy as jnp
    import torch
    g = torch.Generator(device="cuda").manual_seed(0)
    t = {n: torch.randn((b, h, s, d), generator=g, device="cuda", dtype=torch.bfloat16)
         for n in ("q", "k", "v", "do")}
    t["i"] = bc._indices(b, h, s // bc.BLOCK, count, torch, dtype=torch.int32,
                         device="cuda").contiguous()
    return t, {n: jnp.from_dlpack(x.clone()) for n, x in t.items()}


def measure(b, h, s, d, count, rounds: int) -> dict:
    import jax
    import torch
    t, j = inputs(b, h, s, d, count)
    programs = jax_programs(b, h, s, d, count)
    o, lse = jax.jit(programs["lse"][0])(j["q"], j["k"], j["v"], j["i"])
    j.update(o=o, lse=lse)
    torch_fns, (o_t, lse_t) = torch_paths(t, count)
    chains = {}
    for path in PATHS:
        call, names = programs[path]
        args = [j[n] for n in names.split()]
        short, long = jax_chain(call, args, K1), jax_chain(call, args, K2)
        short(), long(), short()  # compile, warm up
        chains[path] = (short, long)
    for fn in torch_fns.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    times = {p: {"jax": [], "torch": []} for p in PATHS}
    for _ in range(rounds):
        for path in PATHS:
            if path in torch_fns:
                times[path]["torch"].append(torch_device_us(torch_fns[path], LAUNCHES))
            times[path]["jax"].append(chain_wall_us(*chains[path], K1, K2))
    result = {p: {side: round(statistics.median(v), 1) for side, v in times[p].items() if v}
              for p in PATHS}
    for p, r in result.items():
        if "torch" in r:
            r["jax/torch"] = round(r["jax"] / r["torch"], 3)
    result["check"] = differences(programs, j, t, o_t, lse_t)
    return result


def differences(programs, j, t, o_t, lse_t) -> dict:
    """Largest |JAX - cuDNN| of o, lse and dq (dq from cuDNN's o and lse)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch
    interface = importlib.import_module(bc.INTERFACE)
    o_j = np.asarray(jax.jit(programs["fwd"][0])(j["q"], j["k"], j["v"], j["i"]), np.float32)
    count = t["i"].shape[-1]
    dq_t = interface._bsa_attn_bwd_sm90_blk128(t["do"], t["q"], t["k"], t["v"], o_t, lse_t,
                                               t["i"], count)[0]
    o_x, lse_x = jnp.from_dlpack(o_t.clone()), jnp.from_dlpack(lse_t.clone())
    dq_j = jax.jit(programs["bwd"][0])(j["q"], j["k"], j["v"], o_x, lse_x, j["i"], j["do"])[0]

    def host(x):
        return x.float().cpu().numpy()
    return {"o_max_abs": float(np.abs(o_j - host(o_t)).max()),
            "lse_max_abs": float(np.abs(np.asarray(j["lse"]) - host(lse_t)).max()),
            "dq_max_abs": float(np.abs(np.asarray(dq_j, np.float32) - host(dq_t)).max()),
            "dq_scale": float(torch.abs(dq_t.float()).max())}


def profile(b, h, s, d, count, folder: str) -> dict:
    """Each JAX path's K2-call chain under the JAX profiler: per call, the
    GPU's busy and idle time and its kernels by name (bench/scaling/
    breakdown.py reads the trace). What a path's wall time holds beyond its
    kernels shows up as idle time or as kernels the other paths lack."""
    import jax
    sys.path.insert(0, os.path.join(BENCH, "scaling"))
    import breakdown
    _, j = inputs(b, h, s, d, count)
    programs = jax_programs(b, h, s, d, count)
    j["o"], j["lse"] = jax.jit(programs["lse"][0])(j["q"], j["k"], j["v"], j["i"])
    out = {}
    for path in PATHS:
        call, names = programs[path]
        chain = jax_chain(call, [j[n] for n in names.split()], K2)
        chain(), chain()  # compile, warm up
        where = os.path.join(folder, "trace-" + path.replace("+", "_"))
        with jax.profiler.trace(where):
            chain()
        got = breakdown.summarize_trace(where, K2)
        mean = got.get("mean", {})
        out[path] = {k: mean.get(k) for k in ("span_us", "busy_us", "idle_us",
                                              "kernels_per_step")}
        out[path]["top"] = got.get("top", [])[:8]
        out[path]["host"] = got.get("host", {}).get("driver", [])[:6]
        harness.log(f"profile {path}: {out[path]}")
    return out


def table(result: dict) -> str:
    rows = ["| path | cuDNN torch (us) | cutecall JAX (us) | JAX / torch |",
            "|---|---|---|---|"]
    for p in PATHS:
        r = result[p]
        rows.append(f"| {p} | {r.get('torch', '-')} | {r['jax']} | {r.get('jax/torch', '-')} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/cutecall_out") + "/bsa_grad")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", default="bench", choices=sorted(bc.SHAPES))
    ap.add_argument("--profile", action="store_true",
                    help="after the timing, each JAX chain under the JAX profiler")
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU: lower every JAX program for sm_90a, check cuDNN's entry points")
    a = ap.parse_args(argv)
    b, h, s, d, count = bc.SHAPES[a.size]["bsa_fwd_sm90"]
    record = {"shape": {"b": b, "h": h, "s": s, "d": d, "count": count}, "k1": K1, "k2": K2,
              "launches": LAUNCHES, "rounds": a.rounds}
    if a.dry_run:
        record["dry_run"] = dry_run(b, h, s, d, count)
    else:
        import jax
        record["device"] = str(jax.devices()[0].device_kind)
        record.update(measure(b, h, s, d, count, a.rounds))
        print(table(record))
        print("check:", record["check"])
        if a.profile:
            record["profile"] = profile(b, h, s, d, count, a.out)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "bsa_grad.json.tmp"), "w") as f:
        json.dump(record, f, indent=1)
    os.replace(os.path.join(a.out, "bsa_grad.json.tmp"), os.path.join(a.out, "bsa_grad.json"))
    print(json.dumps(record if a.dry_run else {"device": record["device"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
