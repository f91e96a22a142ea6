"""Which frames are the user's: warnings and compile errors point at the
user's line even when the user's project lives under a folder named like a
package (a clone named ``cutecall``, a project under ``jax/``)."""

import os
import runpy
import textwrap
import warnings

import cutecall
from cutecall._driver import compile_error as ce, user_frames

_INTERNAL_DIR = os.path.join(os.path.dirname(ce.__file__))


def _internal_warner():
    """A function whose code lives (by its file name) inside cutecall's own
    directory and warns with user_stacklevel, as the driver does."""
    source = textwrap.dedent("""
        import warnings
        from cutecall._driver.user_frames import user_stacklevel

        def warn_like_the_driver():
            warnings.warn("driver says", UserWarning, stacklevel=user_stacklevel())

        def raise_like_the_driver(fn):
            return fn()
    """)
    scope = {}
    exec(compile(source, os.path.join(_INTERNAL_DIR, "_imagined.py"), "exec"), scope)
    return scope


def _user_script(tmp_path, body):
    folder = tmp_path / "cutecall" / "jax" / "jaxlib" / "cutlass" / "project"
    folder.mkdir(parents=True)
    script = folder / "user.py"
    script.write_text(textwrap.dedent(body))
    return str(script)


def test_user_stacklevel_names_a_caller_under_cutecall_and_jax_folders(tmp_path):
    script = _user_script(tmp_path, """
        def run(driver):
            driver["warn_like_the_driver"]()  # line 3: the user's line
    """)
    assert f"{os.sep}cutecall{os.sep}" in script and f"{os.sep}jax{os.sep}" in script
    run = runpy.run_path(script)["run"]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        run(_internal_warner())
    assert [(x.filename, x.lineno) for x in w] == [(script, 3)]


def test_internal_frames_are_the_packages_real_directories(tmp_path):
    dirs = user_frames.package_dirs(("cutecall", "jax"))
    assert user_frames.is_internal(cutecall.__file__, dirs)
    assert user_frames.is_internal(os.path.join(_INTERNAL_DIR, "x.py"), dirs)
    assert not user_frames.is_internal(str(tmp_path / "cutecall" / "jax" / "x.py"), dirs)
    assert not user_frames.is_internal("<frozen runpy>", dirs)
    # A package that is not imported has no directory and no frames.
    assert user_frames.package_dirs(("surely_not_imported_pkg",)) == ()


def test_compile_errors_point_at_a_user_file_under_a_cutecall_folder(tmp_path):
    script = _user_script(tmp_path, """
        def launcher():
            raise ValueError("bad tile")  # line 3
    """)
    launcher = runpy.run_path(script)["launcher"]
    try:
        _internal_warner()["raise_like_the_driver"](launcher)
    except ValueError as e:
        exc = e
    assert ce.root_cause(exc) == "ValueError: bad tile (at user.py:3)"
    assert user_frames.failing_source(exc) == 'raise ValueError("bad tile")  # line 3'
