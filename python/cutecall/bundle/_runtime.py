"""The DSL runtime a bundle records (format 2's ``dsl-runtime`` field).

``runtime_field()`` is ``"<sha256 hex> <version> <path>"`` for the
``libcute_dsl_runtime.so`` this process would load
(``cutecall._driver.runtime.find_runtime_library``): its SHA-256 as the
wheel's RECORD lists it (as the C++ reader, ``cpp/src/bundle_runtime.cc``,
reads it back), else of its bytes, and ``<dist>==<version>`` of the wheel
that installed it (``unknown`` when none did). ``None`` when no runtime is
found: the bundle then records none and opens with whichever is configured.
"""

from __future__ import annotations

import base64
import hashlib
import os
from importlib import metadata


def identify(path: str) -> tuple[str, str]:
    """``(sha256 hex, version)`` of the runtime library at `path`."""
    real = os.path.realpath(path)
    size = os.path.getsize(real)
    for dist in metadata.distributions():
        name = dist.metadata.get("Name") or ""
        if not name.lower().replace("_", "-").startswith("nvidia-cutlass-dsl"):
            continue
        for f in dist.files or ():
            if f.hash is None or f.hash.mode != "sha256" or f.size != size:
                continue
            if os.path.realpath(dist.locate_file(f)) == real:
                digest = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
                return digest.hex(), f"{name.lower().replace('_', '-')}=={dist.version}"
    h = hashlib.sha256()
    with open(real, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest(), "unknown"


def runtime_field() -> str | None:
    from .._driver import runtime
    try:
        path = runtime.find_runtime_library()
    except Exception:  # no usable flavour here: record none
        return None
    if not path or not os.path.isfile(path):
        return None
    digest, version = identify(path)
    return f"{digest} {version} {os.path.realpath(path)}"
