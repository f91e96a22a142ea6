"""What each path of a ``repro`` case compiles to, without a GPU: the
authors' own compile, cutecall's torch front and its JAX front (default
specs, then every extent static), side by side.

Per path: what was compiled in (each operand's static extents, its dynamic
extents and strides with their divisibility classes, the pointer alignment,
from the launch plan), and the kernel's device code (``cuobjdump``): SASS
instructions, global and shared loads and stores by width, backward
branches (loops), registers, whether the cubin is byte for byte the
authors'. A path whose loads are narrower than the authors', or with more
instructions or loops, compiled a weaker specialization: that is cutecall's
to fix. Equal device code means a time difference is not the kernel's.

    python -m bench.external.run losses --device-code [--cases topk]
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import struct
import subprocess

EM_CUDA = 190
_INSTR = re.compile(r"/\*[0-9a-f]{4,5}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
_BRANCH = re.compile(r"/\*([0-9a-f]{4,5})\*/\s+(?:@!?U?P\w+\s+)?BRA\s+(?:\w+\s+)?`?\(?\.?\w*\)?\s*0x([0-9a-f]+)")
_REGS = re.compile(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")


def cubins(obj: bytes) -> list[bytes]:
    """The CUDA ELF images embedded in host object `obj`, in order, each
    cut at the end of its section or program header table."""
    out, i = [], 1
    while (i := obj.find(b"\x7fELF", i)) >= 0:
        if obj[i + 4] == 2 and struct.unpack_from("<H", obj, i + 18)[0] == EM_CUDA:
            phoff, shoff = struct.unpack_from("<QQ", obj, i + 0x20)
            phent, phnum, shent, shnum = struct.unpack_from("<HHHH", obj, i + 0x36)
            out.append(obj[i:i + max(shoff + shent * shnum, phoff + phent * phnum)])
        i += 4
    return out


def cuobjdump() -> str | None:
    """The CUDA toolkit's ``cuobjdump``: on PATH, under $CUDA_HOME, or the
    copy Triton ships."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    for base in (os.environ.get("CUDA_HOME", "/usr/local/cuda"),):
        path = os.path.join(base, "bin", "cuobjdump")
        if os.path.exists(path):
            return path
    try:
        import triton
        path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia",
                            "bin", "cuobjdump")
        return path if os.path.exists(path) else None
    except ImportError:
        return None


def _run(tool: str, flag: str, cubin: bytes, folder: str) -> str:
    path = os.path.join(folder, "kernel.cubin")
    with open(path, "wb") as f:
        f.write(cubin)
    return subprocess.run([tool, flag, path], capture_output=True, text=True,
                          check=False).stdout


def summarize(cubin: bytes, folder: str) -> dict:
    """Instruction counts of one cubin (module docstring); the SASS text
    is written to `folder`/kernel.sass."""
    tool = cuobjdump()
    if tool is None:
        return {"error": "no cuobjdump (CUDA toolkit, or Triton's copy)"}
    sass = _run(tool, "-sass", cubin, folder)
    with open(os.path.join(folder, "kernel.sass"), "w") as f:
        f.write(sass)
    ops = collections.Counter(_INSTR.findall(sass))
    memory = {op: n for op, n in sorted(ops.items())
              if op.startswith(("LDG", "STG", "LDS", "STS", "LD.", "ST.", "RED", "ATOM"))}
    loops = sum(1 for at, to in _BRANCH.findall(sass) if int(to, 16) <= int(at, 16))
    regs = _REGS.search(_run(tool, "-res-usage", cubin, folder))
    return {"instructions": sum(ops.values()), "memory": memory, "loops": loops,
            "registers": int(regs.group(1)) if regs else None,
            "local_bytes": int(regs.group(4)) if regs else None}


def plan_summary(plan) -> list[dict]:
    """Per operand of a launch plan: static extents, dynamic extents and
    strides with their classes, alignment (``_driver.plan.decode_plan``)."""
    from cutecall._driver.plan import decode_plan
    def ints(pairs):
        return [tuple(int(v) for v in p[:2]) for p in pairs]
    return [{"align": int(op["align"]), "static": ints(op["static"]),
             "dynamic": ints(op["dynamic"]), "dynamic_strides": ints(op["dyn_stride"]),
             "static_strides": ints(op["static_stride"]), "strided": bool(op["flags"] & 2)}
            for op in decode_plan(plan)]


def path_objects(repro) -> dict[str, dict]:
    """{path: {"module": host object bytes, "plan": launch plan or None}}
    for the authors' compile and each cutecall path of `repro` (compiled
    here: meta tensors, abstract arrays)."""
    import jax

    from bench.timing import split_arrays
    from cutecall.jax import _compile
    out = {}
    authors = repro.authors("meta")
    out["authors"] = {"module": bytes(authors.dump_to_object("authors")), "plan": None}
    for path, build in (("cutecall_torch", repro.case.torch),
                        ("cutecall_torch_static", repro.torch_static)):
        k, args = build("meta", 0)
        compiled = k.compile(*args)
        out[path] = {"module": compiled.module, "plan": compiled.plan}
    for path, build in (("cutecall_jax", repro.case.jax),
                        ("cutecall_jax_static", repro.jax_static)):
        call, args = build(False, 0)
        arrays, rebuild = split_arrays(args)
        eqn = _compile._find_call(
            jax.make_jaxpr(lambda *a: call(*rebuild(a)))(*arrays).jaxpr)
        kernel = eqn.params["kernel"]
        out[path] = {"module": kernel.module, "plan": kernel.plan}
    return out


def compare(repro, folder: str) -> dict:
    """Every path's plan and device-code summary, and whether its cubin is
    the authors'; SASS files under `folder`/<path>/."""
    objects = path_objects(repro)
    authors_code = cubins(objects["authors"]["module"])
    rows = {}
    for path, obj in objects.items():
        sub = os.path.join(folder, path)
        os.makedirs(sub, exist_ok=True)
        code = cubins(obj["module"])
        row = {"cubins": len(code), "same_as_authors": code == authors_code}
        if obj["plan"] is not None:
            row["plan"] = plan_summary(obj["plan"])
        if code:
            row.update(summarize(code[0], sub))
        rows[path] = row
    return rows


def table(results: dict) -> str:
    """A markdown table: one row per case and path."""
    lines = ["| case | path | same cubin as authors | instructions | loops | registers | "
             "global/shared memory ops |", "|---|---|---|---|---|---|---|"]
    for case, rows in results.items():
        for path, r in rows.items():
            if "error" in r:
                lines.append(f"| {case} | {path} | — | — | — | — | {r['error']} |")
                continue
            mem = ", ".join(f"{k} {v}" for k, v in r.get("memory", {}).items())
            lines.append(f"| {case} | {path} | {'yes' if r['same_as_authors'] else 'no'} | "
                         f"{r.get('instructions')} | {r.get('loops')} | "
                         f"{r.get('registers')} | {mem} |")
    return "\n".join(lines)
