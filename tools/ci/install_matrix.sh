#!/usr/bin/env bash
# make test-install: cutecall's wheels (dist/, from `make wheel`) installed
# the ways users install them, each into a fresh venv with no compiler on
# PATH, each running the tests that install must pass. One line per venv:
#
#   name               python  what pip installs                      tests
#   all-cu13           3.12    wheel[all,cu13,test,external]          the whole Python suite
#                              (newest jax), the third-party corpus   + the C++ package from a
#                                                                     separate CMake project
#                                                                     (tools/ci/cpp_consumer.sh)
#   cu12-oldest-jax    3.13    wheel[all] (the DSL's default flavour:  DSL-compiling smoke: corpus
#                              cu12 only), jax/jaxlib 0.8.1 (oldest)   compiles, examples, JAX lowering
#   torch-only         3.10    wheel[torch] (cu12), no jax             the torch front
#   jax-only           3.12    wheel[jax,cu13], no torch               the JAX front and bundles
#   products           3.12    wheel[cu13,attention,quack,test]        the products' own tests
#                              (their extras alone)                    (attention, QuACK)
#
# The venvs live in build/ci/<name>, recreated each run and removed once its
# tests pass (each is 1-7.5 GiB: torch and jax pull CUDA wheels; four at
# once filled a CI disk), so the disk holds one at a time; KEEP_VENVS=1
# keeps them. pip's cache is off for the same reason. Before each venv the
# free disk is checked against what it needs (the venv and pip's
# downloads), and a shortfall is said in GiB before pip starts. Logs stay
# in build/ci/<name>.log. MATRIX="torch-only jax-only" runs a subset.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"

# Compilers shadowed: an install or test that tries to build fails loudly.
nocc="$root/build/ci/no-compiler"
mkdir -p "$nocc"
for tool in cc gcc g++ c++ clang clang++ cmake ninja make ld; do
  printf '#!/bin/sh\necho "%s: no compiler in this environment (test-install)" >&2\nexit 127\n' \
    "$tool" > "$nocc/$tool"
  chmod +x "$nocc/$tool"
done

wheel_for() {  # the wheel for a python version, e.g. 3.12 -> dist/cutecall-...-cp312-...
  local tag="cp${1/./}"
  ls "$root"/dist/cutecall-*-"$tag"-"$tag"-manylinux_*.whl 2>/dev/null | head -1 \
    || { echo "no $tag wheel in dist/: make wheel WHEEL_PYTHON=$1" >&2; exit 1; }
}

run_venv() {  # name python-version need-GiB "pip args" "check" "pytest args" ["after"]
  # need-GiB: the venv plus pip's downloads, measured (the venv sizes this
  # script prints, and 3-4 GiB of wheels). "after": a command run with the
  # venv's path once its tests pass, with the compilers back on PATH
  # (all-cu13: tools/ci/cpp_consumer.sh).
  local name="$1" version="$2" need="$3" pip_args="$4" check="$5" tests="$6" after="${7:-}"
  local venv="$root/build/ci/$name" log="$root/build/ci/$name.log"
  local py; py="$(tools/find_python.sh "$version")"
  local whl; whl="$(wheel_for "$version")"
  rm -rf "$venv"
  enough_disk "$name" "$need"
  "$py" -m venv "$venv"
  echo "== $name (python $version): pip install ${pip_args//@WHEEL@/$(basename "$whl")}" \
    "($(free_disk) free)"
  local start=$SECONDS
  (
    export PATH="$nocc:$venv/bin:$PATH" PIP_ONLY_BINARY=":all:" PIP_NO_CACHE_DIR=1
    # shellcheck disable=SC2086
    "$venv/bin/pip" install -q ${pip_args//@WHEEL@/$whl}
    "$venv/bin/python" -c "$check"
    cd "$root"  # the tests import the installed wheel: no source tree on sys.path
    # shellcheck disable=SC2086
    "$venv/bin/python" -I -m pytest $tests -q -p no:cacheprovider -x
  ) > "$log" 2>&1 || { tail -n 60 "$log"; echo "test-install $name FAILED (log: $log)"; exit 1; }
  echo "   $(tail -n 1 "$log") [$((SECONDS - start)) s, venv $(du -sh "$venv" | cut -f1)]"
  if [ -n "$after" ]; then
    $after "$venv" > "$log.after" 2>&1 ||
      { tail -n 60 "$log.after"; echo "test-install $name: $after FAILED (log: $log.after)"; exit 1; }
    echo "   $after: $(tail -n 1 "$log.after")"
  fi
  [ "${KEEP_VENVS:-0}" = 1 ] || rm -rf "$venv"
}

free_disk() { df -h --output=avail "$root/build" | tail -n 1 | tr -d ' '; }

enough_disk() {  # name need-GiB: say so before pip fills the disk half-way
  local free_gib; free_gib="$(df -B1G --output=avail "$root/build" | tail -n 1 | tr -d ' ')"
  [ "$free_gib" -ge "$2" ] && return 0
  echo "test-install $1 needs about $2 GiB free under $root/build and $free_gib GiB are:" \
    "its venv holds torch's, JAX's and the DSL's CUDA wheels. Free disk space, or pick" \
    "venvs with MATRIX=\"...\"." >&2
  exit 1
}

# What each venv must see: the wheel (not the source tree), the flavour,
# and which frameworks are importable.
check() {  # flavour jax? torch?
  cat <<EOF
import importlib.util as u, os, sys, cutecall
from cutecall._driver import flavour
assert "/site-packages/cutecall/" in cutecall.__file__, cutecall.__file__
assert flavour.selected().name == "$1", flavour.selected()
assert (u.find_spec("jax") is not None) == $2, "jax"
assert (u.find_spec("torch") is not None) == $3, "torch"
print("cutecall", cutecall.__version__, flavour.selected().name, sys.version.split()[0])
EOF
}

want="${MATRIX:-all-cu13 cu12-oldest-jax torch-only jax-only products}"
for name in $want; do
  case "$name" in
    all-cu13)
      run_venv all-cu13 3.12 11 "@WHEEL@[all,cu13,test,external]" \
        "$(check cu13 True True)" "tests" tools/ci/cpp_consumer.sh ;;
    cu12-oldest-jax)
      run_venv cu12-oldest-jax 3.13 11 "@WHEEL@[all,test,external] jax==0.8.1 jaxlib==0.8.1" \
        "$(check cu12 True True)" \
        "tests/external/test_quack_compile.py tests/external/test_fa4_compile.py tests/examples tests/jax/test_cutlass_call_surface.py tests/driver/test_flavour.py" ;;
    torch-only)
      run_venv torch-only 3.10 9 "@WHEEL@[torch,test]" "$(check cu12 False True)" "tests/torch" ;;
    jax-only)
      run_venv jax-only 3.12 3 "@WHEEL@[jax,cu13,test]" "$(check cu13 True False)" \
        "tests/jax tests/bundle" ;;
    products)  # the [attention] and [quack] extras bring exactly what the products need
      run_venv products 3.12 10 "@WHEEL@[cu13,attention,quack,test]" "$(check cu13 True True)" \
        "tests/attention/test_flash_attention.py tests/attention/test_attention_targets.py tests/quack/test_quack_gemm.py tests/quack/test_quack_jax.py tests/test_warm_process.py" ;;
    *) echo "unknown venv $name" >&2; exit 2 ;;
  esac
done
