"""What the sm100 corpus tests (tests/external/test_*_sm100_compile.py)
share: a module-wide compile session for sm_100a on a host without a GPU
(``CUTECALL_ARCH=sm_100a``, an artifact store of its own), each case's two
fronts compiled once and kept, and the checks every sm100 kernel passes.

    @pytest.fixture(scope="module")
    def fronts(tmp_path_factory):
        with sm100_checks.session(tmp_path_factory) as compiled:
            yield compiled            # compiled(case) -> Fronts, once a case
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time

from corpus_checks import split_arrays

CUSTOM_CALL = "stablehlo.custom_call @cutecall_call"


@dataclasses.dataclass(frozen=True)
class Fronts:
    """A case compiled through both fronts: the journal of each (``(key,
    name, arch, how)`` per kernel got), the lowered module's text, each
    front's ``CompiledKernel`` and the CPU seconds each took."""

    jax_got: list
    torch_got: list
    hlo: str
    jax_kernel: object
    torch_kernel: object
    jax_seconds: float
    torch_seconds: float

    @property
    def operands(self) -> list[str]:
        """The operand names of each custom call in the lowered module."""
        return re.findall(r'operands = "([^"]*)"', self.hlo)


def lower(fn, args):
    """``jax.jit`` over the array leaves of `args` (the rest as given),
    traced and lowered for CUDA."""
    import jax
    arrays, rebuild = split_arrays(args, jax.ShapeDtypeStruct)
    return jax.jit(lambda *a: fn(*rebuild(a))).trace(*arrays).lower(
        lowering_platforms=("cuda",))


def lower_journaled(fn, args) -> list:
    """What lowering ``fn(*args)`` got from a store or compiled:
    ``[(key, name, arch, how)]`` (an in-memory hit adds nothing)."""
    from cutecall._driver.store import memory
    mark = memory.journal_mark()
    lower(fn, args)
    return memory.journal_since(mark)


def heavy_imports_after_cases(module: str, heavy) -> list:
    """The `heavy` modules a fresh process has imported after building
    every case of ``corpus.<module>``: building must import none."""
    import json
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import importlib, json, sys\nsys.path.insert(0, {here!r})\n"
            f"importlib.import_module('corpus.{module}').cases()\n"
            f"print(json.dumps([m for m in {list(heavy)!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=os.environ.copy())
    return json.loads(out.stdout.strip().splitlines()[-1])


def _kernel(got):
    from cutecall._driver.store import memory
    return memory._entries.get(got[-1][0]) if got else None


def compile_fronts(case) -> Fronts:
    """`case` lowered through the JAX front, then compiled through the
    torch front, each journaled apart."""
    from cutecall._driver.store import memory
    mark, start = memory.journal_mark(), time.process_time()
    fn, args = case.jax()
    hlo = lower(fn, args).as_text()
    jax_got, jax_seconds = memory.journal_since(mark), time.process_time() - start
    mark, start = memory.journal_mark(), time.process_time()
    kernel, targs = case.torch()
    kernel.compile(*targs)
    torch_got, torch_seconds = memory.journal_since(mark), time.process_time() - start
    return Fronts(jax_got, torch_got, hlo, _kernel(jax_got), _kernel(torch_got),
                  jax_seconds, torch_seconds)


@contextlib.contextmanager
def session(tmp_path_factory):
    """Compiles for sm_100a (``$CUTECALL_ARCH``) into an artifact store of
    its own, in-process caches empty before and after; yields
    ``compiled(case) -> Fronts``, compiling each case (by name) once."""
    import pytest

    import cutecall
    patch = pytest.MonkeyPatch()
    patch.setenv("CUTECALL_ARCH", "sm_100a")
    patch.delenv("CUTECALL_DEVICE", raising=False)
    patch.setenv("CUTECALL_CACHE_DIR", str(tmp_path_factory.mktemp("sm100-cache")))
    cutecall.clear_cache()
    done: dict = {}

    def compiled(case) -> Fronts:
        if case.name not in done:
            done[case.name] = compile_fronts(case)
        return done[case.name]
    try:
        yield compiled
    finally:
        patch.undo()
        cutecall.clear_cache()


def check_fronts(fronts: Fronts, case) -> None:
    """One compile a front, one custom call, each object for sm_100a."""
    from device_code import assert_blackwell
    assert [how for *_, how in fronts.jax_got] == ["compiled"], case.name
    assert [how for *_, how in fronts.torch_got] == ["compiled"], case.name
    assert fronts.hlo.count(CUSTOM_CALL) == 1, case.name
    for kernel in (fronts.jax_kernel, fronts.torch_kernel):
        assert kernel.arch == "sm_100a", (case.name, kernel.arch)
        assert_blackwell(kernel.module, case.mma, case.name)
