"""The named parts of the test suite (tools/gpu/test_parts.txt, run by
``tools/gpu/gpu test --part NAME`` and ``test-parts``) hold every test file
exactly once: each listed path exists, no path is listed twice or inside
another, and the implicit part "rest" (tests/ minus every listed path) takes
the others."""

import os

from shared import ROOT

PARTS = os.path.join(ROOT, "tools", "gpu", "test_parts.txt")


def parts() -> dict[str, list[str]]:
    found = {}
    with open(PARTS) as f:
        for line in f:
            name, *paths = line.split()
            if name.startswith("#"):
                continue
            assert name not in found and name != "rest", name
            found[name] = paths
    return found


def suite_files() -> list[str]:
    """Every pytest module under tests/ (``test_*.py``), relative to the repo."""
    files = []
    for dirpath, dirnames, names in os.walk(os.path.join(ROOT, "tests")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        files += [os.path.relpath(os.path.join(dirpath, n), ROOT)
                  for n in names if n.startswith("test_") and n.endswith(".py")]
    return sorted(files)


def inside(path: str, listed: str) -> bool:
    return path == listed or path.startswith(listed.rstrip("/") + "/")


def test_every_listed_path_exists_under_tests():
    for name, paths in parts().items():
        assert paths, f"part {name} lists no path"
        for p in paths:
            assert p.startswith("tests/") and os.path.exists(os.path.join(ROOT, p)), (name, p)


def test_no_path_is_listed_twice_or_inside_another():
    listed = [(name, p) for name, paths in parts().items() for p in paths]
    for i, (name, p) in enumerate(listed):
        for other, q in listed[i + 1:]:
            assert not inside(p, q) and not inside(q, p), (name, p, other, q)


def test_each_test_file_runs_in_exactly_one_part():
    listed = {p: name for name, paths in parts().items() for p in paths}
    owners = {f: [listed[p] for p in listed if inside(f, p)] or ["rest"]
              for f in suite_files()}
    assert all(len(o) == 1 for o in owners.values()), \
        {f: o for f, o in owners.items() if len(o) != 1}
    named = set(listed.values())
    assert named <= {o[0] for o in owners.values()}, "a part runs no test file"
    # tests/external (slow: third-party compiles) is split by name, so that
    # "rest" stays small.
    unnamed = [f for f in owners if f.startswith("tests/external/") and owners[f] == ["rest"]]
    assert not unnamed, f"add {unnamed} to a part of tools/gpu/test_parts.txt"
