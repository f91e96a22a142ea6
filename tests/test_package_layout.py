"""The package's architecture, asserted: no import cycles, data flowing one
way (front -> driver -> _core), files of one job, and tests that run the
installed package. Reads the installed cutecall's sources with ``ast`` (every
import, at module level or inside a function, counts); imports nothing."""

import ast
import os

import pytest

from shared import INSTALLED, ROOT, run_python

MAX_LINES = 400

# The layer of each part: a module imports only modules of its own part or
# of lower layers (the longest matching prefix names a module's part).
LAYERS = {
    "cutecall._core": 0, "cutecall._version": 0,    # C++ extension, version
    "cutecall._driver": 1,                           # the one pipeline
    "cutecall.jax": 2, "cutecall.torch": 2,          # the two fronts
    "cutecall.bundle": 3, "cutecall.compat": 3,      # built on the fronts
    "cutecall.services": 3,                          # warm-up, autotuning
    "cutecall.ejkernel": 4, "cutecall.testing": 4,   # public faces of compat
    "cutecall": 5, "cutecall.cli": 5,                # the API, the command
    "cutecall.__main__": 6,                          # users of the API:
    "cutecall.attention": 6, "cutecall.quack": 6,    # products on the API
    "cutecall.examples": 7,                          # teaching kernels
    "cutecall.demo": 8,
}
FRAMEWORKS = ("jax", "jaxlib", "torch")


def layer(module: str) -> tuple[str, int]:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return prefix, LAYERS[prefix]
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")


def modules() -> dict[str, str]:
    """Module name -> source path, for every module installed ("" for the
    C++ extension, which imports nothing of ours)."""
    found = {}
    base = os.path.dirname(INSTALLED)
    for dirpath, dirnames, files in os.walk(INSTALLED):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in files:
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, base)
            if f.endswith(".py"):
                name = rel[:-3].replace(os.sep, ".").removesuffix(".__init__")
                found[name] = path
            elif f.startswith("_core.") and f.endswith(".so"):
                found[os.path.dirname(rel).replace(os.sep, ".") + "._core"] = ""
    return found


def imports_of(name: str, path: str, known: set[str]) -> set[str]:
    """The cutecall modules `name` imports (a ``from package import x``
    counts as importing module ``package.x`` when that is a module)."""
    if not path:
        return set()
    tree = ast.parse(open(path).read(), path)
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1]
                                + ([node.module] if node.module else []))
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    return {m for m in found if m in known and m != name}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    found = modules()
    return {m: imports_of(m, p, set(found)) for m, p in found.items()}


def test_the_walk_sees_the_whole_package(graph):
    for m in ("cutecall._driver.pipeline", "cutecall.jax._primitive",
              "cutecall.torch._kernel", "cutecall.bundle._read",
              "cutecall.services.warmup", "cutecall._core"):
        assert m in graph, m
    assert "cutecall._driver.store.lookup" in graph["cutecall._driver.store.memory"]


def test_no_module_imports_one_that_imports_it_back(graph):
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_data_flows_one_way(graph):
    wrong = []
    for m, targets in graph.items():
        part, rank = layer(m)
        for t in targets:
            tpart, trank = layer(t)
            if trank > rank or (trank == rank and tpart != part):
                wrong.append(f"{m} ({part}) imports {t} ({tpart})")
    assert not wrong, "\n".join(sorted(wrong))


def framework_imports(path: str) -> list[str]:
    """Every import of a framework in a source file, at module level or
    inside a function."""
    found = []
    for node in ast.walk(ast.parse(open(path).read(), path)):
        roots = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level \
            else []
        found += [f"line {node.lineno}: {r}" for r in roots
                  if r.split(".")[0] in FRAMEWORKS]
    return found


def test_the_driver_imports_no_framework_anywhere():
    """The driver imports neither JAX nor torch, in a function either: it
    serves both fronts (and the next one) and each front needs only its own
    framework. The parts below it (`_core`) never do either."""
    wrong = {name: framework_imports(path) for name, path in modules().items()
             if path and layer(name)[1] <= 1}
    assert not any(wrong.values()), {k: v for k, v in wrong.items() if v}


def test_a_front_never_imports_the_other_framework():
    for front, other in (("cutecall.torch", ("jax", "jaxlib")),
                         ("cutecall.jax", ("torch",))):
        for name, path in modules().items():
            if name.startswith(front):
                bad = [f for f in framework_imports(path)
                       if f.split(": ")[1].split(".")[0] in other]
                assert not bad, (name, bad)


def test_importing_the_package_or_the_driver_imports_no_framework():
    code = ("import sys, importlib, pkgutil, cutecall, cutecall._driver as d\n"
            "for m in pkgutil.iter_modules(d.__path__):\n"
            "    importlib.import_module('cutecall._driver.' + m.name)\n"
            "print(sorted(m for m in %r if m in sys.modules))" % (FRAMEWORKS,))
    assert run_python(code).strip() == "[]"


def test_no_source_file_is_over_400_lines():
    """Python and C++ sources of the package (tests and generated data aside)."""
    too_long = []
    for top in (os.path.join(ROOT, "python"), os.path.join(ROOT, "cpp")):
        for dirpath, dirnames, files in os.walk(top):
            dirnames[:] = [d for d in dirnames if d not in ("tests", "__pycache__")]
            for f in files:
                if f.endswith((".py", ".cc", ".h")):
                    path = os.path.join(dirpath, f)
                    with open(path) as src:
                        n = sum(1 for _ in src)
                    if n > MAX_LINES:
                        too_long.append(f"{os.path.relpath(path, ROOT)}: {n} lines")
    assert not too_long, "\n".join(too_long)


def test_tests_run_the_installed_package():
    checkout = os.path.join(ROOT, "python", "cutecall")
    assert os.path.realpath(INSTALLED) != os.path.realpath(checkout), (
        "tests imported the source checkout; run `make install` (tests import "
        "the installed package)")


MAX_FUNCTION_LINES = 80


def long_functions(top: str, limit: int) -> list[str]:
    """Functions and methods (nested ones too) of the sources under `top`
    longer than `limit` lines, from ``def`` to their last line."""
    found = []
    for dirpath, dirnames, files in os.walk(top):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(dirpath, f)
            with open(path) as src:
                tree = ast.parse(src.read(), path)
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = node.end_lineno - node.lineno + 1
                    if n > limit:
                        found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} "
                                     f"{node.name}: {n} lines")
    return found


def test_no_driver_function_is_over_80_lines():
    """The driver reads top to bottom: each step a named function."""
    too_long = long_functions(os.path.join(ROOT, "python", "cutecall", "_driver"),
                              MAX_FUNCTION_LINES)
    assert not too_long, "split into named steps:\n" + "\n".join(too_long)


CORPUS = os.path.join(ROOT, "tests", "external", "corpus")
EXAMPLES_MAX_LINES = 2500


def corpus_modules() -> set[str]:
    """The file names of the QuACK/FA4 corpus (tests/external/corpus)."""
    return {f for f in os.listdir(CORPUS) if f.endswith(".py") and f != "__init__.py"}


def test_no_corpus_module_is_in_the_package():
    """The corpus of tests/external and bench/external lives in the tests,
    not in the wheel (which holds the python/cutecall tree: pyproject's
    ``wheel.packages``)."""
    names = corpus_modules()
    assert {"quack_corpus.py", "fa4_corpus.py", "authors.py"} <= names
    for top in {INSTALLED, os.path.join(ROOT, "python", "cutecall")}:
        old = os.path.join(top, "examples", "external")  # a left-over __pycache__ is no module
        assert not any(f.endswith(".py") for _, _, fs in os.walk(old) for f in fs), old
        shipped = [os.path.relpath(os.path.join(d, f), top)
                   for d, _, files in os.walk(top) for f in files if f in names]
        assert not shipped, shipped


def test_no_built_wheel_holds_the_corpus():
    """The installed distribution's file list (the RECORD of the wheel pip
    installed) and every wheel in dist/ (``pip wheel --no-deps -w dist .``):
    no corpus file, no examples/external."""
    import glob
    import importlib.metadata
    import zipfile
    listings = {"installed": [str(f) for f in importlib.metadata.files("cutecall") or ()]}
    for wheel in glob.glob(os.path.join(ROOT, "dist", "cutecall-*.whl")):
        listings[wheel] = zipfile.ZipFile(wheel).namelist()
    names = corpus_modules()
    for where, listed in listings.items():
        assert listed, f"{where}: no file list"
        bad = [n for n in listed if "examples/external/" in n.replace(os.sep, "/")
               or os.path.basename(n) in names]
        assert not bad, (where, bad)


def test_examples_hold_only_small_teaching_kernels():
    """cutecall.examples: the kernels the docs and demo teach with."""
    top = os.path.join(ROOT, "python", "cutecall", "examples")
    total = 0
    for f in os.listdir(top):
        if f.endswith(".py"):
            with open(os.path.join(top, f)) as src:
                total += sum(1 for _ in src)
    assert total <= EXAMPLES_MAX_LINES, f"examples holds {total} lines"


def _defined_names(path: str) -> set[str]:
    """Top-level names of a module, and ``Class.member`` for its classes."""
    with open(path) as src:
        tree = ast.parse(src.read(), path)
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            for member in getattr(node, "body", ()) if isinstance(node, ast.ClassDef) else ():
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{node.name}.{member.name}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def missing_names(ref: str, package: str, required: bool = False) -> str | None:
    """Why `ref` (``module``, ``module.name``, ``sub/module.name``) does not
    resolve under `package`'s directory, or None. A `ref` whose first part
    is no module of `package` is not checked unless `required`."""
    parts = ref.replace("/", ".").split(".")
    base, path, k = package, None, 0
    while k < len(parts):
        if os.path.isfile(os.path.join(base, parts[k] + ".py")):
            path, k = os.path.join(base, parts[k] + ".py"), k + 1
            break
        if not os.path.isdir(os.path.join(base, parts[k])):
            break
        base, k = os.path.join(base, parts[k]), k + 1
        path = os.path.join(base, "__init__.py")
    if path is None:
        return f"{ref}: no such module" if required else None
    rest = ".".join(parts[k:k + 2])
    names = _defined_names(path)
    if rest and rest not in names and parts[k] not in names:
        return f"{ref}: {os.path.relpath(path, ROOT)} defines no {rest}"
    return None


def test_the_architecture_page_names_only_what_exists():
    """docs/architecture.md: every backticked path, front module (written
    ``jax/_args.name``) and driver module (and the function or class named
    after it) exists."""
    import re
    with open(os.path.join(ROOT, "docs", "architecture.md")) as f:
        text = f.read()
    package = os.path.join(ROOT, "python", "cutecall")
    refs = set(re.findall(r"`([^`\s]+)`", text))
    # In the diagram: module.name words of the driver (fallback.climb ...).
    refs |= set(re.findall(r"\b([a-z_]+\.[A-Za-z_]+)\b", text.split("## The boundary")[0]))
    wrong = []
    for ref in sorted(refs):
        ref = ref.rstrip("/").removesuffix("()")
        if ref.startswith(("python/", "cpp/", "tests/", "tools/", "bench/", "docs/")):
            why = None if os.path.exists(os.path.join(ROOT, ref)) else f"{ref}: no such path"
        elif "/" in ref:
            why = missing_names(ref, package, required=True)
        else:
            why = missing_names(ref, os.path.join(package, "_driver"))
        if why:
            wrong.append(why)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("package", ["_driver", "_driver/store"])
def test_the_driver_map_names_every_driver_module(package):
    """The module map in ``_driver/__init__.py`` (and ``_driver/store``'s)
    names each module and sub-package there, and nothing else."""
    import re
    driver = os.path.join(ROOT, "python", "cutecall", package)
    with open(os.path.join(driver, "__init__.py")) as f:
        doc = ast.get_docstring(ast.parse(f.read()))
    mapped = set(re.findall(r"^``(\w+)``", doc, re.MULTILINE))
    present = {f[:-3] for f in os.listdir(driver)
               if f.endswith(".py") and f != "__init__.py"}
    present |= {d for d in os.listdir(driver)
                if os.path.isfile(os.path.join(driver, d, "__init__.py"))}
    assert mapped == present, (f"not in the map: {sorted(present - mapped)}; "
                               f"in the map, no module: {sorted(mapped - present)}")
