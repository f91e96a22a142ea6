#!/usr/bin/env python3
"""Where a data-parallel FA4 step loses its scaling under XLA's command
buffers (issue 35): the same training step with cutecall's FA4 attention and
with XLA's cuDNN attention, at 1, 2 and 4 GPUs, under several XLA flag sets,
each in a fresh process (XLA reads its flags once), plus a host-side profile
of the 4-GPU step.

Per configuration it reports:
  - chain: wall µs per step of a K2- minus K1-step chain in one ``jit`` (every
    step's weights are results: the harness of bench/attention/shard_step.py);
  - loop: wall µs per step of a Python loop of jitted steps with the weights
    donated (how a training loop runs);
  - with ``--profile``: the host events of a JAX profiler trace of the loop,
    summed by name (the XLA runtime's own annotations: command-buffer
    recording and updates, thunk execution) and the GPU busy time per device.

  python bench/scaling/cmdbuf_probe.py --out probe.json          # all configs
  python bench/scaling/cmdbuf_probe.py --dry-run                  # the plan
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = dict(batch=16, seqlen=4096, heads=16, heads_kv=4, head_dim=128, embed=2048)

# name -> (visible GPUs, extra XLA_FLAGS, profile?)
CONFIGS = {
    "g1": (1, "", False),
    "g1p": (1, "", True),
    "g4_trace_cache": (4, "--xla_cmd_buffer_trace_cache_size=128", False),
    "g2": (2, "", False),
    "g4": (4, "", True),
    "g4_cmdbuf_off": (4, "--xla_gpu_enable_command_buffer=", False),
    "g4_no_custom_call": (4, "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUDNN,COLLECTIVES", True),
}


def attention_impl(name):
    import jax
    if name == "cutecall":
        from cutecall.attention import attention
        return lambda q, k, v: attention(q, k, v, causal=True)

    def cudnn(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn")
    return cudnn


def make_step(attn, average):
    import jax
    import jax.numpy as jnp

    def loss(w, x, y):
        d = y.shape[-1]

        def proj(n):
            return (x @ w[n].astype(x.dtype)).reshape(x.shape[:2] + (-1, d))
        o = attn(proj("q"), proj("k"), proj("v"))
        return jnp.mean((o.astype(jnp.float32) - y.astype(jnp.float32)) ** 2)

    def step(w, x, y):
        g = average(jax.grad(loss)(w, x, y))
        return jax.tree.map(lambda p, g: p - 0.1 * g, w, g)
    return step


def host_profile(run, steps: int) -> dict:
    """Host events of a traced run summed by name (top 25), GPU busy per device."""
    import glob
    import shutil
    import tempfile
    import jax
    from jax.profiler import ProfileData
    folder = tempfile.mkdtemp(prefix="cmdbuf_probe_")
    try:
        jax.profiler.start_trace(folder)
        try:
            run(steps)
        finally:
            jax.profiler.stop_trace()
        (path,) = glob.glob(f"{folder}/**/*.xplane.pb", recursive=True)
        host, gpus = {}, {}
        for plane in ProfileData.from_file(path).planes:
            if plane.name.startswith("/host"):
                for line in plane.lines:
                    for e in line.events:
                        if e.name.startswith("$"):  # Python frames: not the runtime's
                            continue
                        t = host.setdefault(e.name, [0, 0.0])
                        t[0] += 1
                        t[1] += (e.end_ns - e.start_ns) / 1e3
            elif plane.name.startswith("/device:GPU"):
                busy = 0.0
                for line in plane.lines:
                    if line.name.startswith("Stream"):
                        busy += sum((e.end_ns - e.start_ns) / 1e3 for e in line.events)
                gpus[plane.name] = round(busy / steps, 1)
        def rows(items, n):
            top = sorted(items, key=lambda kv: -kv[1][1])[:n]
            return [dict(name=k[:120], count=c / steps, us=round(us / steps, 1))
                    for k, (c, us) in top]
        driver = [(k, v) for k, v in host.items() if k.startswith("cu")]
        return dict(host=rows(host.items(), 40), driver=rows(driver, 25),
                    gpu_busy_us_per_step=gpus)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def measure(impl: str, profile: bool) -> dict:
    import jax
    sys.path.insert(0, os.path.dirname(HERE))
    from timing import jax_wall_us
    from cutecall.attention import training as at
    gpus = jax.devices()
    attn = attention_impl(impl)
    w, x, y = at.problem(jax.random.key(0), **SIZES)
    names = sorted(w)
    if len(gpus) == 1:
        fn = make_step(attn, lambda g: g)
        w, x, y = jax.device_put((w, x, y), gpus[0])
    else:
        from jax.sharding import PartitionSpec as P
        mesh = jax.make_mesh((len(gpus),), ("b",))
        fn = jax.shard_map(make_step(attn, lambda g: jax.lax.pmean(g, "b")), mesh=mesh,
                           in_specs=(P(), P("b"), P("b")), out_specs=P())
        w, x, y = at.place(mesh, w, x, y)
    step = jax.jit(fn)
    flat = lambda *a: step(dict(zip(names, a[:-2])), *a[-2:])  # noqa: E731
    out = dict(impl=impl, gpus=len(gpus))
    out["chain_us"] = round(min(jax_wall_us(flat, [w[n] for n in names] + [x, y], 2, 8)
                                for _ in range(2)), 1)
    donated = jax.jit(fn, donate_argnums=0)
    state = {"w": jax.tree.map(lambda a: a.copy(), w)}

    def run(n):
        for _ in range(n):
            state["w"] = donated(state["w"], x, y)
        jax.block_until_ready(state["w"])
    run(3)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        run(20)
        best = min(best, (time.perf_counter() - t0) / 20 * 1e6)
    out["loop_us"] = round(best, 1)
    if profile:
        out["profile"] = host_profile(run, 10)
        from timing import jax_chain
        chain = jax_chain(flat, [w[n] for n in names] + [x, y], 6)
        chain()
        out["profile_chain"] = host_profile(lambda n: chain(), 6)
    return out


def child(config: str) -> int:
    _, _, profile = CONFIGS[config]
    rows = []
    for impl in ("cutecall", "cudnn"):
        try:
            rows.append(measure(impl, profile))
        except Exception as e:  # one impl failing must not hide the other's numbers
            rows.append(dict(impl=impl, error=f"{type(e).__name__}: {e}"[:2000]))
        print(json.dumps(rows[-1])[:400], flush=True)
    print("ROWS " + json.dumps(rows), flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--timeout", type=int, default=200, help="seconds per configuration")
    ap.add_argument("--child")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    if a.child:
        return child(a.child)
    plan = [c for c in a.configs.split(",") if c]
    for c in plan:
        print(f"plan: {c}: {CONFIGS[c]}")
    if a.dry_run:
        return 0
    result = dict(benchmark="scaling/cmdbuf_probe", sizes=SIZES, date=time.strftime("%Y-%m-%d"),
                  command=" ".join(sys.argv), configs={})
    for c in plan:
        n, flags, _ = CONFIGS[c]
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(map(str, range(n))),
                   XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + flags).strip(),
                   XLA_PYTHON_CLIENT_PREALLOCATE="false")
        t0 = time.time()
        try:
            p = subprocess.run([sys.executable, __file__, "--child", c], env=env, text=True,
                               capture_output=True, timeout=a.timeout)
            rows = [json.loads(ln[5:]) for ln in p.stdout.splitlines() if ln.startswith("ROWS ")]
            result["configs"][c] = dict(flags=flags, rows=rows[0] if rows else None,
                                        rc=p.returncode, stderr_tail=p.stderr[-1500:] if not rows else "")
        except subprocess.TimeoutExpired:
            result["configs"][c] = dict(flags=flags, error=f"timeout {a.timeout}s")
        print(f"== {c} ({time.time() - t0:.0f} s): "
              + json.dumps(result["configs"][c].get("rows") or result["configs"][c])[:1500], flush=True)
        if a.out:
            with open(a.out + ".tmp", "w") as f:
                json.dump(result, f, indent=1)
            os.replace(a.out + ".tmp", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
