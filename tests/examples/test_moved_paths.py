"""The modules that moved out of ``cutecall.examples`` keep their old import
paths for one release: each old module has the new one's public names (and
finds the others there), and importing it warns, naming the new path, on
the importing line."""

import importlib
import sys
import warnings

import pytest

MOVED = {
    "cutecall.examples.flash_attention": "cutecall.attention",
    "cutecall.examples.flash_attention_config": "cutecall.attention.config",
    "cutecall.examples.flash_attention_checks": "cutecall.attention.checks",
    "cutecall.examples.flash_attention_reference": "cutecall.attention.reference",
    "cutecall.examples.flash_attention_kernels": "cutecall.attention.kernels",
    "cutecall.examples.flash_attention_jvp": "cutecall.attention.jvp",
    "cutecall.examples.attention_training": "cutecall.attention.training",
    "cutecall.examples.quack": "cutecall.quack",
    "cutecall.examples.quack_gemm": "cutecall.quack.gemm",
    "cutecall.examples.quack_mlp": "cutecall.quack.mlp",
    "cutecall.examples.quack_mlp_kernels": "cutecall.quack.mlp_kernels",
}


def fresh_import(old: str):
    """Imports `old` anew (its warning fires on a module's first import)."""
    sys.modules.pop(old, None)
    return importlib.import_module(old)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_the_old_path_warns_and_has_the_new_modules_names(old):
    new = importlib.import_module(MOVED[old])
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {MOVED[old]}"):
        module = fresh_import(old)
    for name in getattr(new, "__all__", ()):
        assert getattr(module, name) is getattr(new, name), name
    assert set(getattr(new, "__all__", ())) <= set(module.__all__)
    public = [n for n in vars(new) if not n.startswith("_")]
    assert all(getattr(module, n) is getattr(new, n) for n in public
               if n != "dsl_arch")
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_the_warning_points_at_the_importing_line():
    sys.modules.pop("cutecall.examples.flash_attention", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from cutecall.examples.flash_attention import attention  # noqa: F401
    [w] = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert w.filename == __file__


def test_the_old_names_pinned_by_users():
    """Names of the old modules' ``__all__`` that users import: the
    reference through the jvp module, and the kernels' ``dsl_arch`` (now in
    ``cutecall._driver.dsl``, with FA4's arch as its default)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from cutecall.examples import flash_attention_jvp as fj
        from cutecall.examples import flash_attention_kernels as fk
        from cutecall.examples.attention_training import sharded_step, step  # noqa: F401
        from cutecall.examples.flash_attention import Config, attention  # noqa: F401
    from cutecall.attention import reference as fr
    assert fj.reference_attention is fr.reference_attention
    assert {"reference_attention", "identity_score"} <= set(fj.__all__)
    assert "dsl_arch" in fk.__all__
    assert fk.dsl_arch.__defaults__ == ("sm_90a",)
