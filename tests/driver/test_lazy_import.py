"""``cutecall.import_skipping_init``: a library's kernel modules without its
package ``__init__`` (FA4's and QuACK's pull in torch's interface and
``torch._dynamo``); the ``__init__`` still runs, in the same package, when
something first reads what it defines; a package whose modules need their
``__init__`` falls back to the normal import with a log line."""

import logging
import textwrap

import pytest

import cutecall
from shared import run_python


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """lib: an __init__ that records it ran; lib.kernels needs nothing of it;
    needy: a module that needs what its __init__ sets up."""
    for name, files in {
            "lib": {"__init__.py": "import sys\nsys.modules[__name__].RAN = True\n"
                                   "from .kernels import Kernel\nHEAVY = 'loaded'\n",
                    "kernels.py": "class Kernel:\n    pass\n"},
            "needy": {"__init__.py": "import sys\nsys.needy_setup = True\n",
                      "mod.py": "import sys\nassert sys.needy_setup\nOK = 1\n"}}.items():
        (tmp_path / name).mkdir()
        for f, text in files.items():
            (tmp_path / name / f).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    import sys
    for m in [m for m in sys.modules if m.split(".")[0] in ("lib", "needy")]:
        del sys.modules[m]


def test_kernel_modules_load_without_the_init_which_runs_when_needed(packages):
    import sys
    kernels, = cutecall.import_skipping_init(["lib.kernels"], ["lib"])
    assert kernels.Kernel and "RAN" not in vars(sys.modules["lib"])
    import lib
    assert lib.HEAVY == "loaded" and lib.RAN  # the __init__ ran now, in place
    assert lib.kernels is kernels and lib.Kernel is kernels.Kernel


def test_a_module_that_needs_its_init_imports_normally(packages, caplog):
    with caplog.at_level(logging.INFO, logger="cutecall"):
        mod, = cutecall.import_skipping_init(["needy.mod"], ["needy"])
    assert mod.OK == 1
    assert "importing normally" in caplog.text and "needy.mod" in caplog.text


def test_fa4_and_quack_kernel_modules_skip_torch_dynamo():
    """FA4's sm90 kernel modules need neither FA4's interface nor QuACK's
    autotuner (torch._dynamo, sympy); FA4's package is whole afterwards. If
    FA4 changes so that this no longer holds, the fallback keeps it working
    and this test says so."""
    pytest.importorskip("flash_attn.cute")
    code = textwrap.dedent("""
        import sys, cutecall
        mods = cutecall.import_skipping_init(
            ["flash_attn.cute.flash_fwd_sm90", "flash_attn.cute.flash_bwd_sm90"],
            ["flash_attn.cute", "quack"])
        assert mods[0].FlashAttentionForwardSm90
        print(sorted({m.split(".")[0] for m in sys.modules} & {"sympy", "torch._dynamo"}),
              "torch._dynamo" in sys.modules)
        from flash_attn.cute import flash_attn_func   # the package, whole
        print(callable(flash_attn_func))
    """)
    assert run_python(code).split() == ["[]", "False", "True"]
