#!/usr/bin/env bash
# Device call 2 of 2: install the carried wheels, build cutecall, build the
# hand-written FFI baseline, print versions.
#
#   run(command="bash tools/gpu/setup.sh && . /tmp/site/env.sh && <tests/bench>",
#       carry=[".whl/part2"])
#
# Needs the first chunk of the cu13 wheel staged by tools/gpu/stage1.sh in the
# call just before (it lives in /tmp, which survives ~30 s between calls).
# Everything is installed with `pip install --target /tmp/site`; Python does not
# read .pth files in a --target dir, so /tmp/site/env.sh sets PYTHONPATH to
# what the DSL's nvidia_cutlass_dsl_packages.pth would have added:
#
#   . /tmp/site/env.sh
#
# Re-running in a later call on the same (still warm) machine skips the wheel
# step when /tmp/site already holds these exact wheels.
#
# Environment overrides: PYTHON (python3), CUTECALL_SITE (/tmp/site),
# CUTECALL_STAGE (/tmp/cutecall_stage), CUTECALL_HANDWRITTEN_SO
# (/tmp/cutecall_bench/libhandwritten_ffi.so), CUTECALL_BUILD_DIR
# (/tmp/cutecall_build, CMake build tree), SETUP_SKIP_CUTECALL=1,
# SETUP_SKIP_HANDLER=1.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PYTHON:-python3}"
SITE="${CUTECALL_SITE:-/tmp/site}"
STAGE="${CUTECALL_STAGE:-/tmp/cutecall_stage}"
PART2="$repo/.whl/part2"
WORK="/tmp/cutecall_wheels"
HANDLER_SO="${CUTECALL_HANDWRITTEN_SO:-/tmp/cutecall_bench/libhandwritten_ffi.so}"
LOG_DIR="/tmp/cutecall_logs"
BUILD_DIR="${CUTECALL_BUILD_DIR:-/tmp/cutecall_build}"
t_start=$SECONDS

step() { printf '\n== [%3ds] %s\n' "$((SECONDS - t_start))" "$*"; }
die() { printf '\nsetup.sh: ERROR: %s\n' "$*" >&2; exit 1; }

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
mkdir -p "$SITE" "$LOG_DIR"

# ---------------------------------------------------------------- wheels ----
device_has_typing_extensions_413() {
  "$PY" -c '
import sys
from importlib.metadata import version
try:
    v = tuple(int(p) for p in version("typing_extensions").split(".")[:2])
except Exception:
    sys.exit(1)
sys.exit(0 if v >= (4, 13) else 1)
'
}

install_wheels() {
  [ -f "$PART2/SHA256SUMS" ] ||
    die "no $PART2/SHA256SUMS: this call must carry .whl/part2 (run tools/gpu/fetch_wheels.sh on the dev machine first)"

  local sums="$PART2/SHA256SUMS" big_name chunk0="" d
  big_name="$(head -n 1 "$sums" | awk '{ print $2 }')"
  for d in "$STAGE" "$repo/.whl/part1"; do
    if [ -f "$d/$big_name.chunk0" ]; then chunk0="$d/$big_name.chunk0"; break; fi
  done
  if [ -z "$chunk0" ]; then
    cat >&2 <<EOF

setup.sh: ERROR: STAGE 1 WAS LOST.
  $STAGE/$big_name.chunk0 is missing: the machine was given back (or restarted)
  between device call 1 and this call, and /tmp went with it.
  Redo both calls back to back:
    1. run(command="bash tools/gpu/stage1.sh", carry=[".whl/part1"])
    2. within ~30 s: run(command="bash tools/gpu/setup.sh && ...", carry=[".whl/part2"])
EOF
    exit 3
  fi

  step "verifying chunks ($chunk0 + $PART2/$big_name.chunk1)"
  local want got
  want="$(awk -v n="$big_name.chunk0" '$2 == n { print $1 }' "$sums")"
  got="$(sha256sum "$chunk0" | cut -d' ' -f1)"
  [ "$want" = "$got" ] || die "chunk0 checksum mismatch (staged $got, expected $want): redo stage1"
  (cd "$PART2" && tail -n +2 SHA256SUMS | grep -v '\.chunk0$' | sha256sum -c --quiet -) ||
    die "part2 checksum mismatch: re-run tools/gpu/fetch_wheels.sh and carry .whl/part2 again"

  step "reassembling $big_name"
  rm -rf "$WORK"
  mkdir -p "$WORK"
  cat "$chunk0" "$PART2/$big_name.chunk1" >"$WORK/$big_name"
  want="$(head -n 1 "$sums" | awk '{ print $1 }')"
  got="$(sha256sum "$WORK/$big_name" | cut -d' ' -f1)"
  [ "$want" = "$got" ] || die "reassembled $big_name has sha256 $got, expected $want"
  echo "sha256 OK: $got"

  local wheels=("$WORK/$big_name") f
  for f in "$PART2"/*.whl; do
    # tvm-ffi needs typing-extensions>=4.13; keep the device's own if new enough.
    if [[ "$(basename "$f")" == typing_extensions-* ]] && device_has_typing_extensions_413; then
      echo "device typing_extensions is >= 4.13: not installing $(basename "$f")"
      continue
    fi
    wheels+=("$f")
  done

  step "pip install --target $SITE (${#wheels[@]} wheels)"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --disable-pip-version-check --upgrade --target "$SITE" "${wheels[@]}"
  rm -rf "$WORK"
  # Bytecode now, as a normal pip install would: the device sets
  # PYTHONDONTWRITEBYTECODE=1, so without it every import compiles every
  # module again (3-4 s more for the DSL, FA4 and QuACK in each process).
  step "compiling bytecode in $SITE"
  "$PY" -m compileall -q -j 0 "$SITE" >/dev/null 2>&1 || true
  cp "$sums" "$SITE/.cutecall_wheels.sha256sums"
}

if [ -f "$SITE/.cutecall_wheels.sha256sums" ] && [ -f "$PART2/SHA256SUMS" ] &&
  cmp -s "$SITE/.cutecall_wheels.sha256sums" "$PART2/SHA256SUMS"; then
  step "wheels already installed in $SITE (same SHA256SUMS): skipping"
elif [ -f "$SITE/.cutecall_wheels.sha256sums" ] && [ ! -f "$PART2/SHA256SUMS" ]; then
  step "wheels already installed in $SITE (no .whl/part2 carried): skipping"
else
  install_wheels
fi

# ---------------------------------------------------------------- env.sh ----
DSL_PKGS="$SITE/nvidia_cutlass_dsl/dsl_packages"
[ -d "$DSL_PKGS/cutlass" ] || die "$DSL_PKGS/cutlass missing after install"
cat >"$SITE/env.sh" <<EOF
# Written by tools/gpu/setup.sh. Source it: . $SITE/env.sh
# $DSL_PKGS stands in for nvidia_cutlass_dsl_packages.pth, which Python does
# not process in a --target directory.
if [ -z "\${CUTECALL_ENV_SOURCED:-}" ]; then
  export PYTHONPATH="$DSL_PKGS:$SITE\${PYTHONPATH:+:\$PYTHONPATH}"
  export PATH="$SITE/bin:\$PATH"
  case ":\$PATH:" in *:/usr/local/cuda/bin:*) ;; *) [ -d /usr/local/cuda/bin ] && export PATH="\$PATH:/usr/local/cuda/bin" ;; esac
  export CUTECALL_HANDWRITTEN_SO="$HANDLER_SO"
  export CUTECALL_ENV_SOURCED=1
fi
EOF
# shellcheck disable=SC1091
. "$SITE/env.sh"
echo
echo "export PYTHONPATH=$DSL_PKGS:$SITE\${PYTHONPATH:+:\$PYTHONPATH}"
echo "   (or simply:  . $SITE/env.sh)"

step "import check: cutlass DSL"
"$PY" -c 'import cutlass, cutlass.cute, cutlass.jax; print("cutlass", cutlass.__file__)' ||
  die "the CuTe DSL does not import from $SITE"

# ---------------------------------------------------- hand-written handler ----
# Built in the background while cutecall builds (nvcc and CMake each take a while).
handler_pid=""
if [ "${SETUP_SKIP_HANDLER:-0}" != 1 ]; then
  step "building the hand-written XLA FFI handler -> $HANDLER_SO (background; log: $LOG_DIR/handler_build.log)"
  PYTHON="$PY" bash "$repo/bench/overhead/build_handler.sh" "$HANDLER_SO" >"$LOG_DIR/handler_build.log" 2>&1 &
  handler_pid=$!
fi

# -------------------------------------------------------------- cutecall ----
# A failure here is reported at the very end, after the handler and versions.
cutecall_error=""
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
export CMAKE_BUILD_PARALLEL_LEVEL
if [ "${SETUP_SKIP_CUTECALL:-0}" != 1 ]; then
  step "building + installing cutecall from $repo (log: $LOG_DIR/cutecall_build.log)"
  # The CMake build tree goes to $BUILD_DIR, not the checkout's build/.
  if ! (cd "$repo" && "$PY" -m pip install --no-build-isolation --no-deps --no-index \
    --disable-pip-version-check --upgrade --target "$SITE" -v \
    --config-settings=build-dir="$BUILD_DIR/{wheel_tag}" .) \
    >"$LOG_DIR/cutecall_build.log" 2>&1; then
    tail -n 80 "$LOG_DIR/cutecall_build.log" >&2
    if [ -n "${OUT:-}" ]; then cp "$LOG_DIR/cutecall_build.log" "$OUT/" 2>/dev/null || true; fi
    cutecall_error="cutecall build failed (log tail above; full log $LOG_DIR/cutecall_build.log, copied to \$OUT if set)"
    echo "setup.sh: $cutecall_error" >&2
  else
    grep -E "Built wheel|Successfully installed|CMake Warning|warning:" "$LOG_DIR/cutecall_build.log" | tail -n 10 || true
    # Import from elsewhere so the checkout's python/ does not shadow /tmp/site.
    (cd / && "$PY" -c 'import cutecall, cutecall._core; print("cutecall", cutecall.__version__, cutecall.__file__)') ||
      cutecall_error="cutecall installed but does not import"
  fi
fi

if [ -n "$handler_pid" ]; then
  step "waiting for the hand-written handler build"
  wait "$handler_pid" || { cat "$LOG_DIR/handler_build.log" >&2; die "handler build failed"; }
  tail -n 1 "$LOG_DIR/handler_build.log"
fi

# -------------------------------------------------------------- versions ----
step "versions"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
  echo "nvidia-smi: unavailable"
"$PY" - <<'PYEOF' || true
import importlib.metadata as md
import sys

print("python", sys.version.split()[0], sys.executable)
for dist in ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt",
             "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base",
             "nvidia-cutlass-dsl-libs-cu13", "cuda-bindings", "apache-tvm-ffi",
             "jax-tvm-ffi", "torch", "nanobind", "scikit-build-core",
             "typing-extensions", "cutecall"):
    try:
        print(f"{dist:30s} {md.version(dist)}")
    except md.PackageNotFoundError:
        print(f"{dist:30s} (not installed)")
try:
    import jax
    print("jax devices:", jax.devices())
except Exception as e:  # noqa: BLE001
    print("jax devices: ERROR", e)
PYEOF
nvcc --version 2>/dev/null | tail -n 2 || echo "nvcc: unavailable"
cmake --version 2>/dev/null | head -n 1 || true

[ -z "$cutecall_error" ] || die "$cutecall_error"
step "setup done. In this same call (or a later one within ~30 s):  . $SITE/env.sh"
