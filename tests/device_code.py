"""The GPU code inside a compiled object, read without a GPU: the CUDA ELF
images (cubins) a host object embeds, the SM each is built for (its ELF
header) and its SASS (``cuobjdump -sass``), for tests that check what
arch a kernel was compiled for and which instructions it uses.

    cubins(kernel.module)            # [bytes of each embedded cubin]
    sm_of(cubin)                     # 100 for an sm_100a cubin
    sass(cubin)                      # "code for sm_100a ... UTCHMMA ..."

``cuobjdump`` is the CUDA toolkit's (on PATH) or, failing that, the copy
the triton wheel ships; :func:`cuobjdump` is None when neither is there.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import struct
import subprocess
import tempfile

EM_CUDA = 190
CUDA_ELF_ABI_V8 = 8  # CUDA 13's cubins: the SM in bits 8..15 of e_flags

# Blackwell's tensor-core (tcgen05) instructions in SASS: the MMAs
# (UTC*MMA), tensor-memory loads/stores and the MMA commit barrier; and
# Hopper's warpgroup MMA, which an sm100 kernel must not use.
TCGEN05_MMA = re.compile(r"\bUTC[A-Z]*MMA\b")
TCGEN05_OTHER = ("LDTM", "STTM", "UTCBAR")
HOPPER_MMA = re.compile(r"\bHGMMA\b")


def cubins(obj: bytes) -> list[bytes]:
    """The CUDA ELF images (e_machine EM_CUDA) embedded in host object
    `obj`, in order, each cut at the end of its last header table (the
    program headers follow the section headers in CUDA 13's cubins)."""
    out, i = [], 1
    while (i := obj.find(b"\x7fELF", i)) >= 0:
        if obj[i + 4] == 2 and struct.unpack_from("<H", obj, i + 18)[0] == EM_CUDA:
            phoff, shoff = struct.unpack_from("<QQ", obj, i + 0x20)
            phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", obj, i + 0x36)
            end = max(shoff + shentsize * shnum, phoff + phentsize * phnum)
            out.append(obj[i:i + end])
        i += 4
    return out


def sm_of(cubin: bytes) -> int:
    """The SM number a cubin is built for (100 for sm_100a), from its ELF
    header: ABI version 8, e_flags bits 8..15."""
    abi = cubin[8]
    if abi != CUDA_ELF_ABI_V8:
        raise ValueError(f"a CUDA ELF of ABI version {abi}; this reads version 8")
    return (struct.unpack_from("<I", cubin, 0x30)[0] >> 8) & 0xFF


@functools.lru_cache(maxsize=1)
def cuobjdump() -> str | None:
    """The cuobjdump to use: PATH's, else the triton wheel's, else None."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                        "cuobjdump")
    return path if os.access(path, os.X_OK) else None


def sass(cubin: bytes) -> str:
    """``cuobjdump -sass`` of one cubin (it names the arch: "code for
    sm_100a")."""
    tool = cuobjdump()
    if tool is None:
        raise RuntimeError("no cuobjdump: install the CUDA toolkit or triton")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"cuobjdump -sass failed: {out.stderr.strip()}")
    return out.stdout


def instruction_counts(text: str) -> dict:
    """How many tcgen05 MMAs, tensor-memory loads/stores, MMA commit
    barriers and Hopper warpgroup MMAs a SASS listing has."""
    counts = {"UTC*MMA": len(TCGEN05_MMA.findall(text)),
              "HGMMA": len(HOPPER_MMA.findall(text))}
    counts.update({op: len(re.findall(rf"\b{op}\b", text)) for op in TCGEN05_OTHER})
    return counts


def assert_blackwell(module: bytes, mma: bool, what: str = "") -> dict:
    """Every cubin of `module` (a compiled object) targets sm_100a: SM 100
    in its ELF header, "code for sm_100a" in its SASS, no Hopper HGMMA;
    with `mma`, tcgen05 MMAs, tensor-memory loads and commit barriers too.
    Returns the instruction counts of all cubins together."""
    images = cubins(module)
    assert images, f"{what}: no cubin in the object"
    total: dict = {}
    for image in images:
        assert sm_of(image) == 100, f"{what}: a cubin for SM {sm_of(image)}"
        if cuobjdump() is None:
            continue
        text = sass(image)
        assert set(re.findall(r"code for (sm_\w+)", text)) == {"sm_100a"}, what
        for op, n in instruction_counts(text).items():
            total[op] = total.get(op, 0) + n
    if cuobjdump() is not None:
        assert total["HGMMA"] == 0, f"{what}: Hopper MMAs in an sm100 kernel: {total}"
        if mma:
            assert total["UTC*MMA"] and total["LDTM"] and total["UTCBAR"], \
                f"{what}: no tcgen05 MMA/TMEM/commit in its SASS: {total}"
    return total
