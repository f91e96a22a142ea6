"""``python/cutecall/_core.pyi`` is the typed stub of the built ``_core``,
written by nanobind's stub generator: the test fails when the C++ module
and the committed stub drift apart.

Regenerate it (after building ``_core``) with::

    .venv/bin/python tests/driver/test_core_stub.py

The text is compared when this nanobind is the one that wrote the stub (its
header says which); with another nanobind, whose formatting may differ, the
API is compared: every name, class member and parameter.
"""

import ast
import difflib
import os
import subprocess
import sys
import tempfile

import pytest

if __name__ == "__main__":  # run as a script: shared.py is in tests/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from shared import ROOT, child_env  # noqa: E402

STUB = os.path.join(ROOT, "python", "cutecall", "_core.pyi")
HEADER = ("# The typed stub of cutecall._core, written by nanobind.stubgen {version}:\n"
          "# do not edit. Regenerate: python tests/driver/test_core_stub.py\n")


def nanobind_version() -> str:
    from importlib.metadata import version
    return version("nanobind")


def generate() -> str:
    """The stub of the installed ``cutecall._core``, with its header."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "_core.pyi")
        proc = subprocess.run(
            [sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "cutecall._core",
             "-o", out], cwd=tmp, env=child_env(), capture_output=True, text=True,
            timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        with open(out) as f:
            body = f.read()
    return HEADER.format(version=nanobind_version()) + "\n" + body


def normalized(text: str) -> list[str]:
    """Lines without comments, trailing spaces or blank lines."""
    return [line.rstrip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def api(text: str) -> list[tuple]:
    """Every module-level and class-level name of a stub, with the
    parameter names of functions (formatting and type spelling aside)."""
    def walk(body, prefix: str) -> list[tuple]:
        out = []
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
                params += [f"*{a.vararg.arg}"] if a.vararg else []
                params += [f"**{a.kwarg.arg}"] if a.kwarg else []
                out.append(("def", prefix + node.name, tuple(params)))
            elif isinstance(node, ast.ClassDef):
                out.append(("class", prefix + node.name, ()))
                out += walk(node.body, prefix + node.name + ".")
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out += [("name", prefix + ast.unparse(t), ()) for t in targets]
        return out
    return sorted(set(walk(ast.parse(text).body, "")))


def written_by(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    marker = "nanobind.stubgen "
    return first.split(marker, 1)[1].rstrip(":") if marker in first else ""


def test_the_committed_stub_matches_the_built_module():
    pytest.importorskip("nanobind.stubgen",
                        reason="nanobind's stub generator is not installed")
    with open(STUB) as f:
        committed = f.read()
    built = generate()
    hint = "regenerate it: python tests/driver/test_core_stub.py"
    if written_by(committed) == nanobind_version():
        diff = "\n".join(difflib.unified_diff(
            normalized(committed), normalized(built), "committed _core.pyi",
            "built _core", lineterm="", n=1))
        assert not diff, f"_core.pyi drifted from the built _core; {hint}\n{diff}"
    else:  # another nanobind formats differently: compare the API
        missing = sorted(set(api(built)) - set(api(committed)))
        extra = sorted(set(api(committed)) - set(api(built)))
        assert not (missing or extra), (
            f"_core.pyi drifted from the built _core; {hint}\n"
            f"only in the module: {missing}\nonly in the stub: {extra}")


def test_the_stub_is_valid_python_and_types_the_entry_points():
    with open(STUB) as f:
        names = {name for _, name, _ in api(f.read())}
    assert {"KernelEntry", "device_arch", "TARGET"} <= names


if __name__ == "__main__":
    with open(STUB, "w") as f:
        f.write(generate())
    print(f"wrote {STUB}")
