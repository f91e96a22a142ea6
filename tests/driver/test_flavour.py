"""The CUDA flavour of the CuTe DSL (cutecall._driver.flavour): the DSL's own
rule (newest installed flavour the driver supports), the pin
(CUTECALL_DSL_FLAVOUR), and clear errors where a flavour cannot run. No GPU
needed: the driver's version is an argument of the rule."""

import os
import subprocess
import sys

import pytest

from cutecall._driver import flavour, key

BOTH = {12: flavour.Flavour(12, "ir12.so", "rt12.so"),
        13: flavour.Flavour(13, "ir13.so", "rt13.so")}


@pytest.mark.parametrize("available, driver, pin, want, how", [
    ((12, 13), 13000, None, 13, "newest the driver supports"),
    ((12, 13), 12090, None, 12, "newest the driver supports"),   # a 570 driver
    ((12, 13), None, None, 13, "newest installed (no driver)"),
    ((12, 13), 13000, 12, 12, "pinned by CUTECALL_DSL_FLAVOUR"),  # 580 runs 12.9 code
    ((12,), 13000, None, 12, "newest the driver supports"),
])
def test_the_dsls_rule_and_the_pin(available, driver, pin, want, how):
    chosen = flavour.choose({m: BOTH[m] for m in available}, driver, pin)
    assert (chosen.major, chosen.name, chosen.runtime, chosen.how) == \
        (want, f"cu{want}", f"rt{want}.so", how)


@pytest.mark.parametrize("available, driver, pin, message", [
    ((13,), 12040, None, r"driver supports CUDA 12\.4, older than every installed "
                         r"CuTe DSL flavour \(cu13\)"),
    ((12, 13), 12090, 13, r"flavour cu13 \(pinned by CUTECALL_DSL_FLAVOUR\) needs a "
                          r"driver for CUDA 13\.0 or newer; this driver supports CUDA 12\.9"),
    ((13,), 13000, 12, r"CUTECALL_DSL_FLAVOUR=cu12, but the installed CuTe DSL "
                       r"flavours are cu13: pip install 'cutecall\[cu12\]'"),
    ((), None, None, r"no CuTe DSL flavour installed"),
])
def test_a_flavour_that_cannot_run_is_a_clear_error(available, driver, pin, message):
    with pytest.raises(flavour.FlavourError, match=message):
        flavour.choose({m: BOTH[m] for m in available}, driver, pin)


def test_the_pin_reads_cu12_cu13_or_a_number(monkeypatch):
    for value, want in [("cu12", 12), ("CU13", 13), ("12", 12), ("", None)]:
        monkeypatch.setenv(flavour.ENV, value)
        assert flavour.pinned() == want
    monkeypatch.setenv(flavour.ENV, "cuda12")
    with pytest.raises(flavour.FlavourError, match=r"CUTECALL_DSL_FLAVOUR='cuda12'"):
        flavour.pinned()


def test_the_flavour_is_part_of_every_key():
    assert key.versions()["flavour"] == flavour.selected().name
    assert flavour.selected().name in {f"cu{m}" for m in flavour.installed()}


def _run(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=600)


needs_both = pytest.mark.skipif(set(flavour.installed()) < {12, 13},
                                reason="needs both DSL flavours installed")


@needs_both
def test_the_pin_makes_the_dsl_load_that_flavour():
    out = _run("import cutecall\n"
               "from cutlass.base_dsl.version_info import CUDA_VERSION\n"
               "from cutecall._driver import flavour, runtime\n"
               "print(CUDA_VERSION.major, flavour.selected().name,\n"
               "      '/cu12/' in runtime.find_runtime_library())",
               CUTECALL_DSL_FLAVOUR="cu12")
    assert out.stdout.split() == ["12", "cu12", "True"], out.stderr[-2000:]


@needs_both
def test_a_pin_after_the_dsl_chose_otherwise_is_refused_before_compiling():
    out = _run("import cutlass, os\n"
               "os.environ['CUTECALL_DSL_FLAVOUR'] = 'cu12'\n"
               "import cutecall.torch as ct\n"
               "from cutecall.examples import kernels\n"
               "try:\n"
               "    ct.kernel(kernels.vector_add).compile(*[ct.TensorDesc((8,), 'float32')] * 3)\n"
               "except Exception as e:\n"
               "    print(type(e).__name__, e)\n"
               "import cutecall\n"
               "print('compiles', cutecall.compile_stats()['compiles'])")
    assert "the CuTe DSL loaded cu13, but pinned by CUTECALL_DSL_FLAVOUR is cu12: " \
           "import cutecall before cutlass" in out.stdout, out.stdout + out.stderr[-2000:]
    assert "compiles 0" in out.stdout


def test_doctor_reports_the_flavour_and_its_runtime():
    out = _run("from cutecall.cli import main; main(['doctor', '--json'])")
    import json
    checks = json.loads(out.stdout)["checks"]
    chosen = flavour.selected()
    assert checks["dsl flavour"].startswith(f"{chosen.name} (")
    assert checks["runtime library"] == chosen.runtime
    assert "driver CUDA" in checks
