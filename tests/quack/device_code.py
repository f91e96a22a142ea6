"""The GPU code inside a compiled kernel's object (``CompiledKernel.module``):
its CUDA ELF images, the SM each is for, and their SASS (``nvdisasm`` from
PATH or from the triton wheel's CUDA tools; None when neither is there)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import subprocess
import tempfile

EM_CUDA = 190


def cubins(obj: bytes) -> list[bytes]:
    """The CUDA ELF images (e_machine EM_CUDA) embedded in host object
    `obj`, in order, each through the end of its section and program header
    tables (nvdisasm reads both)."""
    out, i = [], 1
    while (i := obj.find(b"\x7fELF", i)) >= 0:
        if obj[i + 4] == 2 and struct.unpack_from("<H", obj, i + 18)[0] == EM_CUDA:
            phoff, shoff = struct.unpack_from("<QQ", obj, i + 0x20)
            phsize, phnum, shsize, shnum = struct.unpack_from("<HHHH", obj, i + 0x36)
            out.append(obj[i:i + max(shoff + shsize * shnum, phoff + phsize * phnum)])
        i += 4
    return out


def sm_of(cubin: bytes) -> int:
    """The SM a CUDA ELF is for (100 for sm_100a): e_flags bits 8-15."""
    return (struct.unpack_from("<I", cubin, 0x30)[0] >> 8) & 0xFF


def nvdisasm() -> str | None:
    found = shutil.which("nvdisasm")
    if found:
        return found
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    tool = os.path.join(spec.submodule_search_locations[0], "backends", "nvidia", "bin",
                        "nvdisasm")
    return tool if os.path.exists(tool) else None


def sass(cubin: bytes) -> str | None:
    """``nvdisasm -c`` of `cubin` (its ``.target`` line and instructions),
    or None without the tool."""
    tool = nvdisasm()
    if tool is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, "-c", f.name], capture_output=True, text=True,
                              check=True).stdout
