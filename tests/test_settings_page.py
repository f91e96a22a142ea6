"""docs/settings.md lists every ``CUTECALL_*`` environment variable the
library reads, and nothing else: a variable is read where its name is a
string literal of the library's sources (Python: ``python/cutecall``; C++:
``cpp/src``, ``cpp/include``, ``cpp/python``). The C API's status names
(``cutecall_c.h``: ``"CUTECALL_OK"``, ``"CUTECALL_ERROR_NOT_FOUND"``, ...,
``"CUTECALL_UNKNOWN_STATUS"`` for a value not listed) are strings too, and
not variables. Reads the checkout's sources."""

import ast
import os
import re

from shared import ROOT

NAME = re.compile(r"CUTECALL_[A-Z0-9_]*[A-Z0-9]")
STATUS = re.compile(r"CUTECALL_(OK|ERROR_[A-Z_]+|UNKNOWN_STATUS)")
CPP_DIRS = ("cpp/src", "cpp/include", "cpp/python")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def _files(top: str, suffixes: tuple) -> list[str]:
    found = []
    for dirpath, dirnames, files in os.walk(os.path.join(ROOT, top)):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        found += [os.path.join(dirpath, f) for f in files if f.endswith(suffixes)]
    return found


def python_names() -> dict[str, str]:
    """Name -> a file whose string literal it is."""
    out = {}
    for path in _files("python/cutecall", (".py",)):
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and NAME.fullmatch(node.value):
                out.setdefault(node.value, os.path.relpath(path, ROOT))
    return out


def cpp_names() -> dict[str, str]:
    out = {}
    for path in (p for top in CPP_DIRS for p in _files(top, (".cc", ".h"))):
        for literal in _STRING.findall(_COMMENT.sub(" ", open(path).read())):
            value = literal[1:-1]
            if NAME.fullmatch(value) and not STATUS.fullmatch(value):
                out.setdefault(value, os.path.relpath(path, ROOT))
    return out


def page_names() -> set[str]:
    with open(os.path.join(ROOT, "docs", "settings.md")) as f:
        return set(re.findall(r"^\| `(CUTECALL_[A-Z0-9_]+)` \|", f.read(), re.MULTILINE))


def test_the_scan_sees_both_languages():
    assert python_names()["CUTECALL_CACHE_DIR"].endswith("config.py")
    assert cpp_names()["CUTECALL_LAUNCH_BLOCKING"] == "cpp/src/launch_blocking.cc"
    assert "CUTECALL_ERROR_NOT_FOUND" not in cpp_names()     # a status code's name


def test_the_settings_page_lists_every_variable_the_library_reads():
    read = {**cpp_names(), **python_names()}
    listed = page_names()
    missing = {name: path for name, path in read.items() if name not in listed}
    assert not missing, f"read but not in docs/settings.md: {missing}"
    assert not listed - set(read), \
        f"in docs/settings.md but read nowhere: {sorted(listed - set(read))}"


def test_the_settings_page_is_linked():
    for doc in ("README.md", os.path.join("docs", "architecture.md")):
        with open(os.path.join(ROOT, doc)) as f:
            assert "settings.md" in f.read(), doc
