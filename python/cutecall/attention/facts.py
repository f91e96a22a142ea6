"""What FA4 answers about a :class:`~cutecall.attention.config.Config`
that the calls need before any kernel is built, remembered across
processes with ``cutecall.recipe_fact`` (keyed by FA4's and QuACK's
installed files): the Hopper tile configs (the accumulators' shapes follow
them) and each launcher's parameter names (FA4's classes order their
arguments differently per arch). A warm process reads them from the store
and never imports FA4, QuACK, torch or the CuTe DSL; the first process that
asks imports FA4's kernel modules without its package ``__init__``
(``cutecall.import_skipping_init``).

The window resolution FA4's interface applies is :func:`resolve_window`,
checked against FA4's own in ``tests/attention``.
"""

from __future__ import annotations

import functools
import inspect
import types

# The distributions FA4's kernels are made of (FA4 imports QuACK's helpers).
PACKAGES = ("flash-attn-4", "quack-kernels")
# Packages whose __init__ a kernel module does not need (FA4's pulls in its
# torch interface, QuACK's its autotuner and torch._dynamo).
SKIP_INIT = ("flash_attn.cute", "quack")


def fa4(module: str):
    """FA4's (or QuACK's) kernel module `module`, its package ``__init__``
    skipped where the module does not need it."""
    import cutecall
    return cutecall.import_skipping_init([module], SKIP_INIT)[0]


def _sm90_tiles(kind: str, hdim: int, dv: int, causal: bool, local: bool,
                sparse: tuple = ()) -> dict:
    interface = fa4("flash_attn.cute.interface")
    tile_size = interface._tile_size_fwd_sm90 if kind == "fwd" else \
        interface._tile_size_bwd_sm90
    cfg = tile_size(hdim, dv, causal, local, sparse_block_size_q=sparse[0] if sparse else None)
    if kind == "fwd" and sparse:  # block_size given: FA4 fits the tile to it
        cfg = interface._fit_sm90_fwd_tile_to_block_sparsity(cfg, *sparse)
    return {f: getattr(cfg, f) for f in _fields(cfg)}


def _fields(cfg) -> list:
    import dataclasses
    if dataclasses.is_dataclass(cfg):
        return [f.name for f in dataclasses.fields(cfg)]
    return list(cfg._fields)


@functools.lru_cache(maxsize=256)
def sm90_tiles(kind: str, hdim: int, dv: int, causal: bool, local: bool, sparse: tuple = ()):
    """FA4's ``_tile_size_fwd_sm90`` (`kind` "fwd") or ``_tile_size_bwd_sm90``
    ("bwd") for these options, as a namespace of its fields. `sparse`: the
    block sparsity's (q, kv) block size (forward) or (q,) (backward), as
    FA4 passes ``sparse_block_size_q`` (and fits the forward's tile)."""
    import cutecall
    key = (kind, hdim, dv, causal, local) + ((tuple(sparse),) if sparse else ())
    fields = cutecall.recipe_fact("fa4-sm90-tiles", key,
                                  lambda: _sm90_tiles(kind, hdim, dv, causal, local, sparse),
                                  packages=PACKAGES)
    return types.SimpleNamespace(**fields)


_params: dict = {}


def launcher_params(role: str, c, build) -> tuple:
    """The parameter names of the launcher `build()` makes (its
    ``__call__``'s, without ``self`` and ``stream``) for `role` and Config
    `c`; `build` runs only in the first process that asks."""
    import cutecall
    found = _params.get((role, c))
    if found is None:
        def params():
            kernel = build()
            return [n for n in inspect.signature(type(kernel).__call__).parameters
                    if n not in ("self", "stream")]
        found = _params[(role, c)] = tuple(cutecall.recipe_fact(
            "fa4-launcher-params", (role, c), params, packages=PACKAGES))
    return found


def resolve_window(causal: bool, left, right, has_mask_mod: bool) -> tuple:
    """(causal, local, left, right) as FA4's interface reads the options
    (``_resolve_causal_local_window``), for windows already checked to be
    None or >= 0: a mask_mod leaves them as given; causal is a right window
    of 0; a window that is only "right = 0" is causal; any other window is
    local."""
    if has_mask_mod:
        return False, False, left, right
    if causal:
        right = 0
    if left is None and right is None:
        return False, False, None, None
    if left is None and right == 0:
        return True, False, None, None
    return False, True, left, right
