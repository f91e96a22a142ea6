"""Where the installed C++ package is: ``cutecall --cmakedir``.

A wheel ships, inside the ``cutecall`` package, the public headers
(``include/cutecall/``), the core library (``lib/libcutecall_core.a``) and
the CMake package config (``lib/cmake/cutecall/``; CMakeLists.txt,
``cpp/cmake/install.cmake``)::

    $ cmake -S app -B build -Dcutecall_DIR="$(cutecall --cmakedir)"

    # app/CMakeLists.txt
    find_package(cutecall CONFIG REQUIRED)
    target_link_libraries(app PRIVATE cutecall::core)
"""

from __future__ import annotations

import importlib.util
import os

__all__ = ["cmake_dir", "include_dir", "PackageMissing"]


class PackageMissing(FileNotFoundError):
    """This cutecall has no C++ package (a source tree on sys.path)."""


def _package_dirs() -> list[str]:
    """The cutecall package's directories (an editable install has two: the
    source tree's and the one the build installed into)."""
    spec = importlib.util.find_spec(__name__.split(".")[0])
    dirs = list(spec.submodule_search_locations or []) if spec else []
    return dirs or [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]


def _root() -> str:
    dirs = _package_dirs()
    for d in dirs:
        if os.path.isfile(os.path.join(d, "lib", "cmake", "cutecall",
                                       "cutecallConfig.cmake")):
            return d
    raise PackageMissing(
        "cutecall: no C++ package in " + ", ".join(dirs) +
        " (install the wheel, or build with pip install .: it installs "
        "include/, lib/ and lib/cmake/cutecall/ into the package)")


def cmake_dir() -> str:
    """The directory holding ``cutecallConfig.cmake`` (``cutecall_DIR``)."""
    return os.path.join(_root(), "lib", "cmake", "cutecall")


def include_dir() -> str:
    """The directory to add to the include path (holds ``cutecall/``)."""
    return os.path.join(_root(), "include")


def print_dir(flag: str) -> int:
    """``cutecall --cmakedir`` / ``--includedir``: prints the directory;
    the exit status (1: the package is not installed)."""
    import sys
    try:
        print(cmake_dir() if flag == "--cmakedir" else include_dir())
    except PackageMissing as e:
        print(str(e), file=sys.stderr)
        return 1
    return 0
