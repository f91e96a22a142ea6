"""bench/ on the CPU: every benchmark's ``run.py`` imports and answers
``--help`` (its parts too) without a GPU, ``python -m bench.NAME.run``
works from the repository root, nothing under bench/ edits ``sys.path``,
and bench/results keeps its rule (bench/README.md): a page per benchmark,
at most one JSON and one figure each, nothing else, at most 20 files."""

import contextlib
import importlib
import io
import os
import subprocess
import sys

import pytest

from shared import ROOT, child_env

BENCH = os.path.join(ROOT, "bench")
RESULTS = os.path.join(BENCH, "results")
MAX_RESULTS = 20
BENCHMARKS = sorted(d for d in os.listdir(BENCH)
                    if os.path.isfile(os.path.join(BENCH, d, "run.py")))


@pytest.fixture(scope="module")
def bench_modules():
    """``bench.NAME.run`` of every benchmark, imported with the repository
    root on ``sys.path`` for this module only."""
    sys.path.append(ROOT)
    try:
        yield {name: importlib.import_module(f"bench.{name}.run") for name in BENCHMARKS}
    finally:
        sys.path.remove(ROOT)


def help_text(main, argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0, (argv, out.getvalue())
    return out.getvalue()


def test_the_benchmarks_are_the_ones_the_readme_lists():
    with open(os.path.join(BENCH, "README.md")) as f:
        readme = f.read()
    assert len(BENCHMARKS) >= 10, BENCHMARKS
    missing = [n for n in BENCHMARKS if f"`results/{n}.md`" not in readme]
    assert not missing, f"bench/README.md has no row for {missing}"


@pytest.mark.parametrize("name", BENCHMARKS)
def test_run_answers_help_without_a_gpu(bench_modules, name):
    module = bench_modules[name]
    assert module.__doc__, f"bench/{name}/run.py has no docstring (its method)"
    text = help_text(module.main, ["--help"])
    assert f"python -m bench.{name}.run" in text, text[:300]
    for part, main in getattr(module, "PARTS", {}).items():
        assert f"python -m bench.{name}.run {part}" in help_text(main, ["--help"])
        assert part in text, f"{name}'s --help does not name its part {part!r}"


def test_a_benchmark_runs_as_a_module_from_the_root():
    r = subprocess.run([sys.executable, "-m", "bench.scaling.run", "--dry-run",
                        "--gpus", "1,2"], cwd=ROOT, env=child_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "plan: fa4_cutecall, processes, 2 GPUs" in r.stdout, r.stdout


def test_nothing_in_bench_edits_sys_path():
    offenders = []
    for folder, dirs, files in os.walk(BENCH):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            path = os.path.join(folder, f)
            with open(path, "rb") as fh:
                if b"sys.path" in fh.read():
                    offenders.append(os.path.relpath(path, ROOT))
    assert not offenders, offenders


def test_every_benchmark_folder_is_a_package():
    for folder, dirs, files in os.walk(BENCH):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", "results")]
        if any(f.endswith(".py") for f in files):
            assert "__init__.py" in files, os.path.relpath(folder, ROOT)


def test_results_hold_a_page_per_benchmark_and_at_most_a_json_each():
    files = sorted(os.listdir(RESULTS))
    assert len(files) <= MAX_RESULTS, f"bench/results holds {len(files)} files: {files}"
    stray = [f for f in files if os.path.splitext(f)[1] not in (".md", ".json", ".png")
             or os.path.splitext(f)[0] not in BENCHMARKS]
    assert not stray, f"not a benchmark's page, JSON or figure: {stray}"
    pageless = [n for n in BENCHMARKS if f"{n}.md" not in files]
    assert not pageless, f"benchmarks without a page in bench/results: {pageless}"
