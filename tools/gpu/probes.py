"""Probes: small programs that check or diagnose one thing on the GPU.
The sanitizer probes print each step as it finishes, to tell which
computation a sanitizer crash or stall comes with (tools/records/memcheck.md
says what they showed); run one under the sanitizer with `bash tools/gpu/gpu
sanitize python3 tools/gpu/probes.py ...`; `gpu memcheck attn-cases` runs
`attn-case` for several cases. `outputs` and `compare` check that two builds
of cutecall compute the same results.

  outputs --out FILE.npz
      Every case of the QuACK and FlashAttention-4 corpus (test sizes,
      tests/external/corpus) through both fronts, and the example
      attention (cutecall.attention, forward and gradients),
      on fixed random inputs; every output saved. Run it once per build
      (`. SITE/env.sh` first) and twice per build to see which outputs are
      bitwise reproducible at all (FA4's backward accumulates with atomics).
  compare BASE.npz [BASE2.npz] NEW.npz [NEW2.npz]
      Per output: equal bits, or the largest difference; an output that
      BASE and BASE2 agree on bitwise must be bitwise equal in NEW. Exit 1
      when one is not, or when a case fails in one build only.

  attn-case --case N --path P[,P...]
      One case of tests/attention/test_gpu_flash_attention.py, forward and
      backward, through: `ours` (cutecall.attention under
      jax.jit); `xla` and `xla32` (jax.nn.dot_product_attention under jax.jit
      in the inputs' dtype and in float32: the test's two references); `tiny`
      (a small jitted `jnp` program, no attention); `fa4` (FlashAttention-4's
      own torch path, no cutecall, no JAX). JAX paths joined by commas run in
      that order in one process; `all` is `ours,xla32,xla`, as the test runs
      them.
  jax-threads --fn cutecall|jnp [--threads N] [--calls N] [--inputs thread|main]
      Calls from many Python threads at once into one jitted JAX function
      (tests/test_gpu_threads.py's JAX test), compiled once in the main
      thread first: `cutecall` is the test's function (vector_add, then
      `* 2`), `jnp` the same arithmetic without cutecall. Each thread makes
      --calls calls on its own arrays, made (`jnp.full`, `b + i`) in the
      thread or, with --inputs main, beforehand in the main thread. Past
      --hang-s seconds every thread's Python stack is printed and the
      process exits with status 3.
  fa4-own-backward
      FlashAttention-4's own torch path (no cutecall), forward and backward
      of one small attention: does the sanitizer itself cope with FA4's
      Hopper backward kernel, apart from cutecall?
"""
import argparse
import concurrent.futures as cf
import faulthandler
import os
import sys
import threading
import time

CASES = [  # B, Sq, Sk, H, Hkv, D, dtype, causal: as in the attention test
    (2, 1000, 1000, 4, 4, 128, "bfloat16", False),
    (2, 1000, 1000, 4, 4, 128, "bfloat16", True),
    (1, 777, 777, 8, 2, 64, "float16", True),
    (2, 300, 1000, 8, 1, 128, "bfloat16", False),
    (2, 513, 513, 4, 2, 64, "bfloat16", False),
]
JAX_PATHS = ("ours", "xla", "xla32", "tiny")
t0 = time.perf_counter()
_lock = threading.Lock()


def step(what):
    with _lock:
        print(f"{time.perf_counter() - t0:7.1f} s  {what}", flush=True)


# ------------------------------------------------------------ attn-case ----
def attn_jax(path, b, sq, sk, h, hkv, d, dtype, causal):
    import jax
    import jax.numpy as jnp
    if path == "tiny":
        step("tiny: " + str(float(jax.jit(lambda x: (x * 2).sum())(jnp.ones(1024)))))
        return
    if path == "xla32":
        dtype = "float32"
    if path == "ours":
        from cutecall.attention import attention
        fn = lambda q, k, v: attention(q, k, v, causal=causal)  # noqa: E731
    else:
        fn = lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
    keys = jax.random.split(jax.random.key(0), 4)
    shapes = [(b, sq, h, d), (b, sk, hkv, d), (b, sk, hkv, d), (b, sq, h, d)]
    q, k, v, do = (jax.random.normal(kk, s, jnp.float32).astype(dtype)
                   for kk, s in zip(keys, shapes))

    def fwd_bwd(q, k, v, do):
        o, vjp = jax.vjp(fn, q, k, v)
        return o, vjp(do)
    step(f"{path}: inputs ready")
    compiled = jax.jit(fwd_bwd).lower(q, k, v, do).compile()
    step(f"{path}: compiled")
    o, grads = compiled(q, k, v, do)
    jax.block_until_ready((o, grads))
    step(f"{path}: ran; finite: " + str(all(bool(jnp.isfinite(x.astype(jnp.float32)).all())
                                           for x in (o, *grads))))


def fa4_forward_backward(b, sq, sk, h, hkv, d, dtype, causal):
    import torch
    from flash_attn.cute.interface import flash_attn_func
    dt = getattr(torch, dtype)
    mk = lambda s: torch.randn(*s, device="cuda", dtype=dt, requires_grad=True)  # noqa: E731
    q, k, v = mk((b, sq, h, d)), mk((b, sk, hkv, d)), mk((b, sk, hkv, d))
    out = flash_attn_func(q, k, v, causal=causal)
    out = out[0] if isinstance(out, tuple) else out
    torch.cuda.synchronize()
    step("forward done")
    out.backward(torch.randn_like(out))
    torch.cuda.synchronize()
    step("backward done; finite: " + str(all(bool(torch.isfinite(x.grad).all())
                                              for x in (q, k, v))))


def attn_case(a, error):
    paths = ["ours", "xla32", "xla"] if a.path == "all" else a.path.split(",")
    if a.path != "fa4" and not set(paths) <= set(JAX_PATHS):
        error(f"argument --path: {a.path!r}: not fa4, all, or JAX paths "
              f"joined by commas ({', '.join(JAX_PATHS)})")
    case = CASES[a.case - 1]
    step(f"case {a.case} {case} via {a.path}")
    if a.path == "fa4":
        fa4_forward_backward(*case)
    else:
        for path in paths:
            attn_jax(path, *case)
    return 0


# ---------------------------------------------------------- jax-threads ----
def jitted(fn):
    import jax
    if fn == "cutecall":
        import cutecall
        from cutecall.examples import kernels
        add = cutecall.cutlass_call(kernels.vector_add, output_shape_dtype=lambda a, b: a)
        return jax.jit(lambda a, b: add(a, b) * 2)
    return jax.jit(lambda a, b: (a + b) * 2)


def jax_threads(a, error):
    faulthandler.dump_traceback_later(a.hang_s, exit=True, file=sys.stdout)
    import jax
    import jax.numpy as jnp
    f = jitted(a.fn)
    b = jnp.arange(4096, dtype=jnp.float32)
    f(jnp.ones(4096, jnp.float32), b).block_until_ready()
    step(f"{a.fn}: compiled and ran once in the main thread")

    def inputs(t):
        return jnp.full((4096,), float(t), jnp.float32), [b + i for i in range(a.calls)]
    made = [inputs(t) for t in range(a.threads)] if a.inputs == "main" else None

    def work(t):
        x, bs = made[t] if made else inputs(t)
        outs = []
        for i in range(a.calls):
            outs.append(f(x, bs[i]))
            if i in (0, a.calls - 1):
                step(f"thread {t:2d}: call {i} enqueued")
        got = [float(o[7]) for o in jax.block_until_ready(outs)]
        step(f"thread {t:2d}: done")
        return got == [2.0 * (t + 7 + i) for i in range(a.calls)]

    with cf.ThreadPoolExecutor(a.threads) as pool:
        right = list(pool.map(work, range(a.threads)))
    faulthandler.cancel_dump_traceback_later()
    step(f"{a.fn}: {sum(right)} of {a.threads} threads right")
    return 0 if all(right) else 1


# ----------------------------------------------------- fa4-own-backward ----
def fa4_own_backward(a, error):
    import torch
    from flash_attn.cute.interface import flash_attn_func
    q, k, v = (torch.randn(1, 256, 2, 128, device="cuda", dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    out = flash_attn_func(q, k, v)
    out = out[0] if isinstance(out, tuple) else out
    torch.cuda.synchronize()
    step("forward done")
    out.backward(torch.randn_like(out))
    torch.cuda.synchronize()
    step("backward done")
    print("finite grads:", all(bool(torch.isfinite(x.grad).all()) for x in (q, k, v)), flush=True)
    return 0



# -------------------------------------------------------- outputs, compare ----
def _bits(x):
    import numpy as np
    if type(x).__module__.startswith("torch"):
        import torch
        return x.detach().contiguous().view(torch.uint8).cpu().numpy()
    return np.frombuffer(np.asarray(x).tobytes(), np.uint8)


def _float(x):
    import numpy as np
    if type(x).__module__.startswith("torch"):
        return x.detach().float().cpu().numpy()
    return np.asarray(x).astype(np.float64)


def outputs(a, error):
    import jax
    import numpy as np
    import torch
    corpus_parent = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                 "tests", "external")
    sys.path.append(os.path.normpath(corpus_parent))  # tests/external/corpus
    try:
        from corpus import fa4_corpus, quack_corpus
    except ImportError:  # a build from before the corpus left the wheel (825a091)
        from cutecall.examples.external import fa4_corpus, quack_corpus
    saved, failed = {}, []

    def keep(name, leaves):
        for i, x in enumerate(leaves):
            saved[f"{name}#{i}:bits"] = _bits(x)
            saved[f"{name}#{i}:f64"] = _float(x)

    for case in quack_corpus.cases("test") + fa4_corpus.cases("test"):
        for front in ("jax", "torch"):
            name = f"{case.name} {front}"
            try:
                if front == "jax":
                    call, args = case.jax(True, 0)
                    keep(name, jax.tree.leaves(jax.block_until_ready(call(*args))))
                else:
                    k, args = case.torch("cuda", 0)
                    k(*args)
                    torch.cuda.synchronize()
                    keep(name, [args[i] for i in case.torch_outputs])
                step(f"{name}: ok")
            except Exception as e:  # noqa: BLE001 (recorded, the rest goes on)
                failed.append(name)
                step(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    try:
        from cutecall.attention import attention
    except ImportError:  # a build before the move (825a091 and older)
        from cutecall.examples.flash_attention import attention
    ks = jax.random.split(jax.random.key(0), 3)
    q, k, v = (jax.random.normal(kk, (2, 384, 4, 128), jax.numpy.bfloat16) for kk in ks)
    for causal in (False, True):
        f = jax.jit(jax.value_and_grad(
            lambda q, k, v: attention(q, k, v, causal=causal).astype(np.float32).sum(),
            argnums=(0, 1, 2)))
        keep(f"example attention causal={causal}", jax.tree.leaves(f(q, k, v)))
        step(f"example attention causal={causal}: ok")
    np.savez(a.out, **saved, failed=np.array(failed, dtype=str))
    print(f"{len(saved) // 2} outputs in {a.out}; {len(failed)} failed: {failed}")
    return 0


def compare(a, error):
    import numpy as np
    if len(a.files) not in (2, 3, 4):
        error("compare BASE [BASE2] NEW [NEW2]")
    half = (len(a.files) + 1) // 2
    base, new = [np.load(f) for f in a.files[:half]], [np.load(f) for f in a.files[half:]]
    bad, rows = 0, {"bitwise": 0, "bitwise (not reproducible)": 0, "differs": 0}
    fails = [set(b["failed"].tolist()) for b in base + new]
    if any(f != fails[0] for f in fails):
        print("cases failing in one build only:", sorted(set.union(*fails) - set.intersection(*fails)))
        bad += 1
    for key in sorted(k for k in base[0].files if k.endswith(":bits")):
        name = key[:-5]
        same = [np.array_equal(base[0][key], n[key]) if key in n.files else False
                for n in base[1:] + new]
        reproducible = all(same[:len(base) - 1])
        if all(same):
            rows["bitwise"] += 1
            continue
        x, y = base[0][name + ":f64"], new[0][name + ":f64"]
        err = float(np.max(np.abs(x - y))) if x.shape == y.shape else float("inf")
        scale = float(np.max(np.abs(x))) or 1.0
        if reproducible:
            bad += 1
            rows["differs"] += 1
            print(f"DIFFERS (bitwise in the base runs): {name}: max |diff| {err:.3g} "
                  f"(max |x| {scale:.3g})")
        else:
            rows["bitwise (not reproducible)"] += 1
            print(f"not reproducible in the base either: {name}: max |diff| {err:.3g} "
                  f"(max |x| {scale:.3g})")
    print(", ".join(f"{n}: {v}" for n, v in rows.items()))
    return 1 if bad else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    sub = p.add_subparsers(dest="probe", required=True)
    s = sub.add_parser("attn-case", help="one attention case through one or more paths")
    s.add_argument("--case", type=int, required=True, choices=range(1, len(CASES) + 1),
                   help="1-based, in the order of the test's CASES")
    s.add_argument("--path", required=True, help="fa4, all, or JAX paths joined by "
                   "commas: " + ",".join(JAX_PATHS))
    s.set_defaults(run=attn_case)
    s = sub.add_parser("jax-threads", help="many threads into one jitted function")
    s.add_argument("--fn", choices=("cutecall", "jnp"), required=True)
    s.add_argument("--threads", type=int, default=16)
    s.add_argument("--calls", type=int, default=20)
    s.add_argument("--hang-s", type=float, default=60.0)
    s.add_argument("--inputs", choices=("thread", "main"), default="thread",
                   help="where each thread's arrays are made (eager jnp operations)")
    s.set_defaults(run=jax_threads)
    s = sub.add_parser("fa4-own-backward", help="FA4's own forward and backward, no cutecall")
    s.set_defaults(run=fa4_own_backward)
    s = sub.add_parser("outputs", help="the corpus's and examples' outputs, saved")
    s.add_argument("--out", required=True)
    s.set_defaults(run=outputs)
    s = sub.add_parser("compare", help="outputs of two builds, bitwise where reproducible")
    s.add_argument("files", nargs="+")
    s.set_defaults(run=compare)
    a = p.parse_args(argv)
    return a.run(a, sub.choices[a.probe].error)


if __name__ == "__main__":
    sys.exit(main())
