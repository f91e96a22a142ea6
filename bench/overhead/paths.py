"""The paths the launch-overhead benchmark measures: each builds ``call(x)
-> y``, one custom call launching the empty CuTe kernel (``empty_launcher``
of ``cutecall.examples.kernels``; ``copy`` for the bandwidth run), in a
graph-capable and a no-graph form (``Target``). What each path is:
``run.py``'s docstring."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from bench.overhead.config import GRAPH_ONLY_PATHS, Config
from bench.harness import log, short_error

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HANDLER_SOURCE = HERE / "handwritten_ffi.cu"
BUILD_HANDLER = HERE / "build_handler.sh"


@dataclasses.dataclass
class Target:
    """A path in one CUDA-graph mode: ``build()`` returns ``call(x) -> y``."""

    key: str
    path: str
    graph: bool
    build: Callable[[], Callable[[Any], Any]]


class Paths:
    """Builds the call for each path, lazily, caching shared state."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self._kernels = None
        self.kernels_source: str | None = None
        self._handler_lib = None
        self._tvm_fn = None
        self._registered: set[str] = set()
        self._keepalive: list[Any] = []

    # -- shared pieces --------------------------------------------------
    def kernels(self):
        """``cutecall.examples.kernels``; if cutecall itself does not import,
        the same file loaded standalone (the launchers only need the DSL)."""
        if self._kernels is not None:
            return self._kernels
        try:
            self._kernels = importlib.import_module("cutecall.examples.kernels")
            self.kernels_source = "cutecall.examples.kernels"
        except Exception as exc:  # noqa: BLE001
            path = REPO / "python" / "cutecall" / "examples" / "kernels.py"
            log(f"[bench] cutecall.examples.kernels did not import ({short_error(exc, 200)}); "
                f"loading {path} standalone")
            spec = importlib.util.spec_from_file_location("_cutecall_bench_kernels", path)
            if spec is None or spec.loader is None:
                raise
            mod = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = mod
            spec.loader.exec_module(mod)
            self._kernels = mod
            self.kernels_source = str(path)
        return self._kernels

    def sds(self, n: int | None = None):
        import jax
        import jax.numpy as jnp

        return jax.ShapeDtypeStruct((n or self.cfg.n,), jnp.float32)

    # -- (a) cutecall -----------------------------------------------------
    def cutecall(self, graph: bool, launcher: str = "empty_launcher", n: int | None = None):
        import cutecall

        fn = getattr(self.kernels(), launcher)
        return cutecall.cutlass_call(fn, output_shape_dtype=self.sds(n), allow_cuda_graph=graph)

    # -- (b) hand-written XLA FFI handlers --------------------------------
    def handler_lib(self):
        """The built handwritten_ffi.cu, (re)built first if it is missing or
        older than its source."""
        if self._handler_lib is None:
            import ctypes

            so = Path(self.cfg.handler_so)
            if not so.is_file() or so.stat().st_mtime < HANDLER_SOURCE.stat().st_mtime:
                log(f"[bench] {so} missing or older than {HANDLER_SOURCE.name}; "
                    f"building it with {BUILD_HANDLER}")
                subprocess.run(["bash", str(BUILD_HANDLER), str(so)], check=True,
                               env={"PYTHON": sys.executable, **os.environ},
                               stdout=sys.stderr, stderr=sys.stderr)
            self._handler_lib = ctypes.cdll.LoadLibrary(str(so))
        return self._handler_lib

    def _handler_call(self, symbol: str):
        import jax

        name = f"cutecall_bench.{symbol}"
        if name not in self._registered:
            capsule = jax.ffi.pycapsule(getattr(self.handler_lib(), symbol))
            jax.ffi.register_ffi_target(name, capsule, platform="CUDA")
            self._registered.add(name)
        sds = self.sds()
        return lambda x: jax.ffi.ffi_call(name, sds)(x)

    def handwritten(self, graph: bool):
        return self._handler_call("HandwrittenEmpty" if graph else "HandwrittenEmptyNoGraph")

    def handwritten_ex(self, graph: bool):
        """Graph-capable only (``GRAPH_ONLY_PATHS``): ``graph`` is always True."""
        return self._handler_call("HandwrittenEmptyEx")

    # -- (c) cutlass.jax ----------------------------------------------------
    def cutlass_jax(self, graph: bool, launcher: str = "empty_launcher", n: int | None = None):
        import cutlass.jax as cjax

        fn = getattr(self.kernels(), launcher)
        return cjax.cutlass_call(fn, output_shape_dtype=self.sds(n), allow_cuda_graph=graph)

    # -- (d) TVM-FFI + jax_tvm_ffi ---------------------------------------
    def tvm_function(self):
        """``empty_launcher`` compiled with ``--enable-tvm-ffi``; the stream
        argument becomes the TVM-FFI environment stream, which jax_tvm_ffi
        sets to XLA's stream around each call, so the function takes
        ``(x, out)``."""
        if self._tvm_fn is None:
            import tvm_ffi  # noqa: F401 - the DSL needs it for --enable-tvm-ffi
            import cutlass
            import cutlass.cute as cute
            from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

            x = make_fake_compact_tensor(cutlass.Float32, (self.cfg.n,))
            y = make_fake_compact_tensor(cutlass.Float32, (self.cfg.n,))
            stream = make_fake_stream(use_tvm_ffi_env_stream=True)
            compiled = cute.compile(self.kernels().empty_launcher, stream, x, y,
                                    options="--enable-tvm-ffi")
            self._keepalive.append(compiled)  # owns the JIT-ed code
            fn = compiled
            if hasattr(compiled, "__tvm_ffi_object__"):
                fn = compiled.__tvm_ffi_object__()  # the positional tvm_ffi.Function
            if fn is None:
                raise RuntimeError("cute.compile(--enable-tvm-ffi) produced no tvm_ffi.Function")
            self._tvm_fn = fn
        return self._tvm_fn

    def tvm_ffi(self, graph: bool):
        import jax
        import jax_tvm_ffi

        name = f"cutecall_bench.tvm_ffi_{'graph' if graph else 'nograph'}"
        if name not in self._registered:
            jax_tvm_ffi.register_ffi_target(name, self.tvm_function(), ["args", "rets"],
                                            platform="gpu", allow_cuda_graph=graph)
            self._registered.add(name)
        sds = self.sds()
        return lambda x: jax.ffi.ffi_call(name, sds)(x)

    # -- targets ------------------------------------------------------------
    def targets(self, graph_modes: tuple[bool, ...] = (False, True)) -> list[Target]:
        """No-graph target first: it runs the kernel once outside any stream
        capture, so lazy module loading never happens inside a capture.
        Graph-only paths have no no-graph target."""
        out = []
        for path in self.cfg.paths:
            builder = getattr(self, path)
            for graph in graph_modes:
                if graph or path not in GRAPH_ONLY_PATHS:
                    key = path if graph else f"{path}_nograph"
                    out.append(Target(key, path, graph, lambda b=builder, g=graph: b(g)))
        return out
