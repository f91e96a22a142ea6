"""What FlashAttention-4's own torch interface builds for a problem on a
target arch, without a GPU: its host code (``_flash_attn_fwd``,
``_flash_attn_bwd``) runs on fake torch tensors (``FakeTensorMode``, FA4's
way of compiling ahead of time) with ``cute.compile`` intercepted, so every
kernel object it would compile is captured and nothing compiles. FA4
reads the arch from ``FLASH_ATTENTION_ARCH`` and the SM count from
``FLASH_ATTENTION_NUM_SMS`` (its cross-compile settings), set here to the
target's; objects are built under ``cutecall.current_target(arch)
.building()`` (the DSL's arch and ``HardwareInfo`` answer for the target).

Used by test_attention_selection.py to compare cutecall.attention's kernel
objects with FA4's, attribute by attribute."""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def _env(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def capture(target, run) -> list:
    """The kernel objects FA4's host code `run(t)` hands to ``cute.compile``,
    in order (`t(*shape, dtype=bf16)` makes a fake tensor; FA4's compile
    caches are set aside meanwhile)."""
    import cutlass.cute as cute
    import torch
    from flash_attn.cute import interface
    from torch._subclasses.fake_tensor import FakeTensorMode
    seen = []

    def intercept(kernel, *args, **kwargs):
        seen.append(kernel)
        return lambda *a, **kw: None
    cached = (interface._flash_attn_fwd, interface._flash_attn_bwd, interface._bwd_preprocess,
              interface._bwd_postprocess_convert, interface._flash_attn_fwd_combine)
    saved = [f.compile_cache for f in cached]
    arch = target.arch.removesuffix("a")
    with _env(FLASH_ATTENTION_ARCH=arch, FLASH_ATTENTION_NUM_SMS=target.device.sm_count):
        interface._get_device_arch.cache_clear()
        original, cute.compile = cute.compile, intercept
        for f in cached:
            f.compile_cache = {}
        try:
            with target.building(), FakeTensorMode():
                run(lambda *shape, dtype=torch.bfloat16: torch.empty(shape, dtype=dtype))
        finally:
            cute.compile = original
            for f, cache in zip(cached, saved):
                f.compile_cache = cache
            interface._get_device_arch.cache_clear()
    return seen


def _same(a, b, name: str) -> bool:
    from cutecall._driver.fingerprint import fingerprint
    try:
        if a == b:
            return True
    except Exception:  # noqa: BLE001 -- e.g. an array's ambiguous truth
        pass
    try:
        return fingerprint(a, name) == fingerprint(b, name)
    except TypeError:  # not hashable and not equal
        return False


def differences(ours, theirs) -> dict:
    """{attribute: (ours, theirs)} where two kernel objects differ (equal
    values, or equal content fingerprints: callables by source and captured
    values), plus their classes."""
    if type(ours) is not type(theirs):
        return {"class": (type(ours).__name__, type(theirs).__name__)}
    a, b = vars(ours), vars(theirs)
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b))
            if not _same(a.get(k), b.get(k), k)}
