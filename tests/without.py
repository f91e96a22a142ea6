"""Runs pytest with some packages unimportable, as if not installed:
``python tests/without.py jax,jaxlib -- tests/torch -q``. A blocked import
raises ``ModuleNotFoundError`` naming the package, so code that handles a
missing framework is exercised as a user without it would run it (``make
test`` runs the torch front's tests this way: they must not need JAX)."""

import importlib.abc
import sys


class _Blocker(importlib.abc.MetaPathFinder):
    def __init__(self, names):
        self.names = frozenset(names)

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(
                f"No module named {name!r} (blocked by tests/without.py)", name=name)
        return None


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    blocked = [n for n in argv[0].split(",") if n]
    already = [n for n in blocked if n in sys.modules]
    if already:
        print(f"tests/without.py: {already} already imported", file=sys.stderr)
        return 2
    sys.meta_path.insert(0, _Blocker(blocked))
    import pytest
    return pytest.main(argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
