"""The GPU code inside a cutecall entry: the CUDA ELF images (cubins) its
host object embeds, their SM (``e_flags``) and their SASS (``nvdisasm``,
from the CUDA toolkit or the copy in triton's wheel). A module name of its
own: tests/external and tests/quack each have a ``device_code`` module,
and one pytest session imports a name once."""

from __future__ import annotations

import glob
import os
import shutil
import struct
import subprocess
import tempfile

EM_CUDA = 190


def cubins(obj: bytes) -> list[bytes]:
    """The CUDA ELF images (e_machine EM_CUDA) embedded in host object
    `obj`, in order, each cut where its last table or section ends."""
    out, i = [], 1
    while (i := obj.find(b"\x7fELF", i)) >= 0:
        if obj[i + 4] == 2 and struct.unpack_from("<H", obj, i + 18)[0] == EM_CUDA:
            out.append(obj[i:i + _elf_size(obj, i)])
        i += 4
    return out


def _elf_size(obj: bytes, at: int) -> int:
    phoff, shoff = struct.unpack_from("<QQ", obj, at + 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", obj, at + 0x36)
    end = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    for k in range(shnum):
        sh = at + shoff + k * shentsize
        kind, = struct.unpack_from("<I", obj, sh + 4)
        offset, size = struct.unpack_from("<QQ", obj, sh + 0x18)
        if kind != 8:  # SHT_NOBITS holds no bytes
            end = max(end, offset + size)
    return end


def sm_of(cubin: bytes) -> int:
    """The SM a cubin is for (100 for sm_100a): bits 8-15 of its e_flags."""
    return (struct.unpack_from("<I", cubin, 0x30)[0] >> 8) & 0xFF


def nvdisasm() -> str | None:
    """A path to nvdisasm, or None."""
    found = shutil.which("nvdisasm") or next(iter(sorted(
        glob.glob("/usr/local/cuda*/bin/nvdisasm"), reverse=True)), None)
    if found:
        return found
    try:
        import triton
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                        "nvdisasm")
    return path if os.path.exists(path) else None


def sass(cubin: bytes, tool: str) -> str:
    """`cubin` disassembled (its ``.target`` line included)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, f.name], capture_output=True, text=True,
                              check=True).stdout
