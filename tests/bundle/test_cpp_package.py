"""The C++ side of bundles on CPU: the manifest records the DSL runtime,
typed headers (right calls compile, wrong ones do not), ``cutecall
--cmakedir``, the installed headers (all of cpp/include/cutecall, each
complete on its own) and the package's targets (cutecall::core and its
first name, cutecall::bundle). The full find_package consumer runs in
test-install (tools/ci/cpp_consumer.sh)."""

import os
import re
import shutil
import subprocess
import sys

import pytest

import cutecall
from cutecall.bundle import _header, _package, _runtime
from shared import ROOT, f32, like_first


@pytest.fixture(scope="module")
def calls():
    import jax
    from cutecall.examples import kernels, signatures
    n, = jax.export.symbolic_shape("n")
    s = jax.ShapeDtypeStruct((n,), "float32")
    one = cutecall.TensorSpec(dims=("n",))
    return {
        "vector_add": cutecall.compile(kernels.vector_add, s, s, output_shape_dtype=like_first,
                                       input_spec=one, output_spec=one),
        "affine": cutecall.compile(signatures.affine, f32(64), 1.0, 2, 3, True,
                                   output_shape_dtype=like_first),
    }


@pytest.fixture(scope="module")
def exported(calls, tmp_path_factory):
    d = tmp_path_factory.mktemp("cpp")
    digest = cutecall.export(d / "k.bundle", {**calls, "bare-add.v2": calls["vector_add"].kernel},
                             header=d / "kernels.h")
    return d, digest


def _compiler():
    cxx = shutil.which("c++")
    if cxx is None or subprocess.run([cxx, "--version"], capture_output=True).returncode:
        pytest.skip("no working C++ compiler on PATH")
    return cxx


def test_manifest_records_the_runtime(exported):
    d, _ = exported
    text = (d / "k.bundle" / "manifest.txt").read_text()
    assert text.startswith("cutecall-bundle 3\n")
    field = _runtime.runtime_field()
    if field is None:
        assert "dsl-runtime" not in text
    else:
        sha, version, path = field.split(" ", 2)
        assert f"dsl-runtime {sha} {version} {path}\n" in text
        assert version.startswith("nvidia-cutlass-dsl-libs-cu") and os.path.isfile(path)
    assert sorted(cutecall.load_bundle(d / "k.bundle")) == ["affine", "bare-add.v2", "vector_add"]


def test_identify_reads_record_or_hashes(tmp_path):
    import hashlib
    lib = tmp_path / "libcute_dsl_runtime.so"
    lib.write_bytes(b"not a wheel's file")
    assert _runtime.identify(str(lib)) == (hashlib.sha256(b"not a wheel's file").hexdigest(),
                                           "unknown")


def test_header_declares_typed_functions(exported):
    d, digest = exported
    text = (d / "kernels.h").read_text()
    assert digest in text and "namespace kernels {" in text
    assert ("inline cutecall::Status vector_add(\n    const cutecall::Bundle& bundle,\n"
            "    cutecall::TensorRef<const float, 1> a,\n"
            "    cutecall::TensorRef<const float, 1> b,\n"
            "    cutecall::TensorRef<float, 1> c,\n    cudaStream_t stream)") in text
    assert "float scale,\n    int32_t shift,\n    int64_t offset,\n    bool negate," in text
    assert "Shared extents (dims=): n." in text
    # A bare kernel: no dtype recorded, its element size is.
    assert "inline cutecall::Status bare_add_v2(" in text
    assert "cutecall::TensorRef<const cutecall::Elem<4>, 1> a" in text


CALLS = {
    "right": "kernels::vector_add(b, x, y, z, s); kernels::affine(b, x, z, 1.f, 2, 3, true, s);",
    "dtype": "kernels::vector_add(b, x, i, z, s);",
    "rank": "kernels::vector_add(b, x, m, z, s);",
    "arity": "kernels::vector_add(b, x, z, s);",
    "scalar count": "kernels::affine(b, x, z, 1.f, 2, 3, s);",
}


@pytest.mark.parametrize("case", CALLS)
def test_wrong_calls_do_not_compile(exported, case, tmp_path):
    cxx = _compiler()
    d, _ = exported
    src = tmp_path / "call.cc"
    src.write_text('#include "kernels.h"\n'
                   "void f(const cutecall::Bundle& b, float* p, int* q, cudaStream_t s) {\n"
                   "  cutecall::TensorRef<float, 1> x(p, {4}), y(p, {4}), z(p, {4});\n"
                   "  cutecall::TensorRef<int, 1> i(q, {4});\n"
                   "  cutecall::TensorRef<float, 2> m(p, {2, 2});\n"
                   f"  (void)i; (void)m; {CALLS[case]}\n}}\n")
    r = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", f"-I{ROOT}/cpp/include",
                        f"-I{d}", str(src)], capture_output=True, text=True)
    if case == "right":
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode != 0, f"a {case} mismatch compiled"
        assert "TensorRef" in r.stderr or "cudaStream_t" in r.stderr, r.stderr


def test_cmakedir():
    try:
        where = _package.cmake_dir()
    except _package.PackageMissing:
        pytest.skip("this cutecall was not installed with its C++ package")
    assert os.path.isfile(os.path.join(where, "cutecallConfig.cmake"))
    out = subprocess.run([sys.executable, "-m", "cutecall", "--cmakedir"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == where
    inc = _package.include_dir()
    for h in ("bundle.h", "cutecall_c.h", "tensor_ref.h"):
        assert os.path.isfile(os.path.join(inc, "cutecall", h))
    # Internal headers stay out of the package.
    assert not os.path.exists(os.path.join(inc, "cutecall", "module_registry.h"))


def _installed_include_dir():
    try:
        return _package.include_dir()
    except _package.PackageMissing:
        pytest.skip("this cutecall was not installed with its C++ package")


def test_cpp_include_holds_exactly_the_installed_headers():
    """Every header of cpp/include/cutecall is installed (internal ones live
    in cpp/src), and each includes only installed headers: an installed
    header compiles alone against the installed include directory."""
    inc = _installed_include_dir()
    where = os.path.join(ROOT, "cpp", "include", "cutecall")
    source = sorted(os.listdir(where))
    assert sorted(os.listdir(os.path.join(inc, "cutecall"))) == source
    for h in source:
        with open(os.path.join(where, h)) as f:
            text = f.read()
        for included in re.findall(r'^\s*#\s*include\s*"([^"]+)"', text, re.M):
            assert included.startswith("cutecall/") and included[9:] in source, (h, included)
    cxx = _compiler()
    for h in source:
        r = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-x", "c++", f"-I{inc}", "-"],
                           input=f"#include <cutecall/{h}>\n", capture_output=True, text=True)
        assert r.returncode == 0, (h, r.stderr)


def test_package_exports_core_and_its_first_name(tmp_path):
    """find_package(cutecall): cutecall::core links, and cutecall::bundle
    (the target's first name) is the same library."""
    _compiler()
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("no cmake on PATH")
    try:
        cmake_dir = _package.cmake_dir()
    except _package.PackageMissing:
        pytest.skip("this cutecall was not installed with its C++ package")
    (tmp_path / "main.cc").write_text(
        '#include <cutecall/bundle.h>\n'
        'int main() { return cutecall::ArchRunsOn("sm_90a", "sm_90") ? 0 : 1; }\n')
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(consumer LANGUAGES CXX)\n"
        "find_package(cutecall CONFIG REQUIRED)\n"
        "add_executable(with_core main.cc)\n"
        "target_link_libraries(with_core PRIVATE cutecall::core)\n"
        "add_executable(with_bundle main.cc)\n"
        "target_link_libraries(with_bundle PRIVATE cutecall::bundle)\n")
    build = tmp_path / "build"
    for cmd in ([cmake, "-S", str(tmp_path), "-B", str(build), f"-Dcutecall_DIR={cmake_dir}"],
                [cmake, "--build", str(build), "-j", "2"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    for exe in ("with_core", "with_bundle"):
        assert subprocess.run([str(build / exe)]).returncode == 0


def test_read_bundle_reads_format_1(exported, tmp_path):
    import hashlib
    d, _ = exported
    old = tmp_path / "old.bundle"
    shutil.copytree(d / "k.bundle", old)
    text = (old / "manifest.txt").read_text()
    body = "".join(line for line in text[:text.rindex("manifest-sha256 ")].splitlines(True)
                   if not line.startswith("dsl-runtime "))
    body = body.replace("cutecall-bundle 3", "cutecall-bundle 1", 1)
    (old / "manifest.txt").write_text(
        body + f"manifest-sha256 {hashlib.sha256(body.encode()).hexdigest()}\n")
    assert sorted(cutecall.load_bundle(old)) == ["affine", "bare-add.v2", "vector_add"]
    # A format-1 manifest may not hold format 2's field.
    body = text[:text.rindex("manifest-sha256 ")].replace(
        "cutecall-bundle 3", "cutecall-bundle 1", 1)
    if "dsl-runtime " not in body:
        return
    (old / "manifest.txt").write_text(
        body + f"manifest-sha256 {hashlib.sha256(body.encode()).hexdigest()}\n")
    with pytest.raises(Exception, match="unexpected or repeated field 'dsl-runtime'"):
        cutecall.load_bundle(old)
