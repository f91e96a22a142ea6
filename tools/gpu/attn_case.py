"""One case of tests/external/test_gpu_flash_attention.py, forward and
backward, through one path, printing each step as it finishes. Run under
compute-sanitizer to tell which path a sanitizer crash comes with:

  compute-sanitizer --tool memcheck python3 tools/gpu/attn_case.py --case 3 --path ours

Paths: `ours` (cutecall.examples.flash_attention under jax.jit); `xla`
and `xla32` (jax.nn.dot_product_attention under jax.jit in the inputs'
dtype and in float32: the test's two references); `tiny` (a small jitted
`jnp` program, no attention); `fa4` (FlashAttention-4's own torch path, no
cutecall, no JAX). JAX paths joined by commas run in that order in one
process (`--path xla32,ours`); `all` is `ours,xla32,xla`, as the test runs
them.
"""
import argparse
import time

CASES = [  # B, Sq, Sk, H, Hkv, D, dtype, causal: as in the test
    (2, 1000, 1000, 4, 4, 128, "bfloat16", False),
    (2, 1000, 1000, 4, 4, 128, "bfloat16", True),
    (1, 777, 777, 8, 2, 64, "float16", True),
    (2, 300, 1000, 8, 1, 128, "bfloat16", False),
    (2, 513, 513, 4, 2, 64, "bfloat16", False),
]
JAX_PATHS = ("ours", "xla", "xla32", "tiny")
t0 = time.perf_counter()


def step(what):
    print(f"{time.perf_counter() - t0:7.1f} s  {what}", flush=True)


def run_jax(path, b, sq, sk, h, hkv, d, dtype, causal):
    import jax
    import jax.numpy as jnp
    if path == "tiny":
        step("tiny: " + str(float(jax.jit(lambda x: (x * 2).sum())(jnp.ones(1024)))))
        return
    if path == "xla32":
        dtype = "float32"
    if path == "ours":
        from cutecall.examples.flash_attention import attention
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


def run_fa4(b, sq, sk, h, hkv, d, dtype, causal):
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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", type=int, required=True, choices=range(1, len(CASES) + 1),
                   help="1-based, in the order of the test's CASES")
    p.add_argument("--path", required=True, help="fa4, all, or JAX paths joined by "
                   "commas: " + ",".join(JAX_PATHS))
    a = p.parse_args()
    paths = ["ours", "xla32", "xla"] if a.path == "all" else a.path.split(",")
    if a.path != "fa4" and not set(paths) <= set(JAX_PATHS):
        p.error(f"argument --path: {a.path!r}: not fa4, all, or JAX paths "
                f"joined by commas ({', '.join(JAX_PATHS)})")
    case = CASES[a.case - 1]
    step(f"case {a.case} {case} via {a.path}")
    if a.path == "fa4":
        run_fa4(*case)
    else:
        for path in paths:
            run_jax(path, *case)


if __name__ == "__main__":
    main()
