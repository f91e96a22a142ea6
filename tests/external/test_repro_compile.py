"""Why the per-shape SIMT layernorm of the repro corpus ran at 0.89x of its
authors' in both fronts, on the CPU: compiled with every extent static
(``static=True``), cutecall's kernel is the authors' byte for byte; with
the default dynamic extents its row loops keep a run-time trip count (no
unrolled loads, a division by N), which is the loss
(bench/external/device_code.py compares every case)."""

import pytest

torch = pytest.importorskip("torch")

from corpus import repro_corpus  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::cutecall.StaticFallbackWarning")


def test_the_static_layernorm_is_the_authors_kernel(compiles):
    import sys

    from shared import ROOT
    sys.path.append(ROOT)
    try:
        from bench.external.device_code import cubins
    finally:
        sys.path.remove(ROOT)
    r = next(r for r in repro_corpus.repros("test") if "layernorm" in r.case.name)
    authors = cubins(bytes(r.authors("meta").dump_to_object("authors")))
    code = {}
    for form, build in (("default", r.case.torch), ("static", r.torch_static)):
        k, args = build("meta", 0)
        code[form] = cubins(k.compile(*args).module)
    assert code["static"] == authors
    assert code["default"] != authors
    assert compiles() == 2
