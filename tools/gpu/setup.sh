# shellcheck shell=bash
# `gpu setup [--tree DIR|FILE.tar.gz] [--site DIR]`, sourced by tools/gpu/gpu
# (run directly, it forwards there). Device call 2 of 2:
#
#   run(command="bash tools/gpu/gpu setup && bash tools/gpu/gpu test",
#       carry=[".whl/part2"])      # right after tools/gpu/stage1.sh
#
# 1. Wheels, into /tmp/site (the wheel site) once: reassemble the cu13 libs
#    wheel from chunk 0 (staged by stage1.sh in /tmp/cutecall_stage) and
#    chunk 1 (carried in .whl/part2), check every sha256, `pip install
#    --no-index --no-deps --target /tmp/site`, compile bytecode. Skipped when
#    /tmp/site already holds these exact wheels (then no carry is needed).
# 2. SITE/env.sh: Python does not read .pth files in a --target directory,
#    so env.sh puts what nvidia_cutlass_dsl_packages.pth would add (the DSL's
#    dsl_packages) and the site on PYTHONPATH. A site other than the wheel
#    site gets the wheel site after itself: it holds only its own cutecall
#    and shares the wheels. Sourcing another site's env.sh replaces the
#    first one's entries (the PYTHONPATH from before the first is kept in
#    CUTECALL_BASE_PYTHONPATH).
# 3. cutecall built from the tree (--tree: default this checkout; a tarball
#    is unpacked to /tmp/cutecall_tree_<site name>) and installed into the
#    site; CMake tree /tmp/cutecall_build[_<site name>], log in
#    /tmp/cutecall_logs/. A build failure is reported at the end (exit 1),
#    after the handler and the versions.
# 4. The hand-written XLA FFI handler (bench/overhead/handwritten_ffi.cu) to
#    /tmp/cutecall_bench/libhandwritten_ffi.so, in parallel with 3; for the
#    wheel site, or when missing.
# 5. fa4-jax (bench/attention's fa4_jax path), for the wheel site: the
#    wheels in .whl/part2/fa4jax/ into a site of their own,
#    FA4JAX_SITE (/tmp/fa4jax_site), once: they pin jax-tvm-ffi 0.1.2
#    and the wheel site holds 0.1.3. bench/attention puts that site first
#    on sys.path itself; nothing else sees it. An import check follows; a
#    failure there is a warning (the benchmark records it per row).
# 6. Versions.
#
# Environment: PYTHON (python3), CUTECALL_SITE (default --site, /tmp/site),
# CUTECALL_WHEEL_SITE (/tmp/site), CUTECALL_STAGE (/tmp/cutecall_stage),
# FA4JAX_SITE (/tmp/fa4jax_site),
# CUTECALL_HANDWRITTEN_SO, CUTECALL_BUILD_DIR, SETUP_SKIP_CUTECALL=1,
# SETUP_SKIP_HANDLER=1. Exit 3: stage 1 was lost (redo both calls).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then exec bash "$(dirname "$0")/gpu" setup "$@"; fi

# /tmp/cutecall_sp/<site name>/site-packages -> the site; prints the link.
site_packages_link() {
  local link
  link="/tmp/cutecall_sp/$(basename "$1")/site-packages"
  mkdir -p "$(dirname "$link")" && ln -sfn "$1" "$link"
  echo "$link"
}

cmd_setup() (
  set -euo pipefail
  # shellcheck disable=SC2153  # SITE, REPO, WHEEL_SITE, PY, OUT: set by tools/gpu/gpu
  tree="$REPO" site="$SITE"
  while [ $# -gt 0 ]; do
    case "$1" in
      --tree) tree="$2"; shift 2 ;;
      --site) site="$2"; shift 2 ;;
      *) die "gpu setup: unknown argument '$1' (usage: gpu setup [--tree DIR|FILE.tar.gz] [--site DIR])" ;;
    esac
  done
  site="$(mkdir -p "$site" && cd "$site" && pwd)"
  name="$(basename "$site")"
  suffix=""; [ "$site" = "$WHEEL_SITE" ] || suffix="_$name"
  stage="${CUTECALL_STAGE:-/tmp/cutecall_stage}"
  part2="$REPO/.whl/part2"
  handler_so="${CUTECALL_HANDWRITTEN_SO:-/tmp/cutecall_bench/libhandwritten_ffi.so}"
  log_dir=/tmp/cutecall_logs
  build_dir="${CUTECALL_BUILD_DIR:-/tmp/cutecall_build$suffix}"
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  mkdir -p "$log_dir"
  if [ -f "$tree" ]; then
    step "unpacking $tree into /tmp/cutecall_tree$suffix"
    rm -rf "/tmp/cutecall_tree$suffix" && mkdir -p "/tmp/cutecall_tree$suffix"
    tar -xf "$tree" -C "/tmp/cutecall_tree$suffix"
    tree="/tmp/cutecall_tree$suffix"
  fi
  [ -f "$tree/pyproject.toml" ] || die "no $tree/pyproject.toml: --tree takes a cutecall checkout or a tarball of one"

  # ------------------------------------------------------------ wheels ----
  if [ "$site" = "$WHEEL_SITE" ]; then
    if [ -f "$site/.cutecall_wheels.sha256sums" ] && [ -f "$part2/SHA256SUMS" ] &&
      cmp -s "$site/.cutecall_wheels.sha256sums" "$part2/SHA256SUMS"; then
      step "wheels already installed in $site (same SHA256SUMS): skipping"
    elif [ -f "$site/.cutecall_wheels.sha256sums" ] && [ ! -f "$part2/SHA256SUMS" ]; then
      step "wheels already installed in $site (no .whl/part2 carried): skipping"
    else
      install_wheels "$site" "$stage" "$part2"
    fi
  else
    [ -f "$WHEEL_SITE/.cutecall_wheels.sha256sums" ] ||
      die "the wheel site $WHEEL_SITE has no wheels: run 'bash tools/gpu/gpu setup' (carry .whl/part2) first"
    step "site $site shares the wheels of $WHEEL_SITE"
  fi

  # ------------------------------------------------------------ env.sh ----
  # Each site is imported through a link named site-packages, as a pip
  # install is: QuACK fingerprints its epilogues' dependencies and treats
  # only code under a site-packages (or the stdlib) directory as installed.
  site_link="$(site_packages_link "$site")"
  wheel_link="$(site_packages_link "$WHEEL_SITE")"
  dsl_pkgs="$wheel_link/nvidia_cutlass_dsl/dsl_packages"
  [ -d "$dsl_pkgs/cutlass" ] || die "$dsl_pkgs/cutlass missing after install"
  path="$dsl_pkgs:$site_link"; [ -z "$suffix" ] || path="$path:$wheel_link"
  cat >"$site/env.sh" <<EOF
# Written by tools/gpu/gpu setup (tree $tree). Source it: . $site/env.sh
# $dsl_pkgs stands in for nvidia_cutlass_dsl_packages.pth, which Python does
# not process in a --target directory.
if [ "\${CUTECALL_ENV_SOURCED:-}" != "$site" ]; then
  export CUTECALL_BASE_PYTHONPATH="\${CUTECALL_BASE_PYTHONPATH-\${PYTHONPATH:-}}"
  export PYTHONPATH="$path\${CUTECALL_BASE_PYTHONPATH:+:\$CUTECALL_BASE_PYTHONPATH}"
  export PATH="$site/bin:\$PATH"
  case ":\$PATH:" in *:/usr/local/cuda/bin:*) ;; *) [ -d /usr/local/cuda/bin ] && export PATH="\$PATH:/usr/local/cuda/bin" ;; esac
  export CUTECALL_HANDWRITTEN_SO="$handler_so"
  export CUTECALL_ENV_SOURCED="$site"
fi
EOF
  # shellcheck disable=SC1091
  . "$site/env.sh"
  echo
  echo "export PYTHONPATH=$path\${PYTHONPATH:+:\$PYTHONPATH}"
  echo "   (or simply:  . $site/env.sh)"
  step "import check: cutlass DSL"
  "$PY" -c 'import cutlass, cutlass.cute, cutlass.jax; print("cutlass", cutlass.__file__)' ||
    die "the CuTe DSL does not import from $site"
  [ -n "$suffix" ] || install_fa4jax "$part2"

  # ------------------------------------- hand-written handler (background) ----
  handler_pid=""
  if [ "${SETUP_SKIP_HANDLER:-0}" != 1 ] && { [ -z "$suffix" ] || [ ! -f "$handler_so" ]; }; then
    step "building the hand-written XLA FFI handler -> $handler_so (background; log: $log_dir/handler_build.log)"
    PYTHON="$PY" bash "$REPO/bench/overhead/build_handler.sh" "$handler_so" >"$log_dir/handler_build.log" 2>&1 &
    handler_pid=$!
  fi

  # ---------------------------------------------------------- cutecall ----
  cutecall_error=""
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
  build_log="$log_dir/cutecall_build$suffix.log"
  if [ "${SETUP_SKIP_CUTECALL:-0}" != 1 ]; then
    step "building + installing cutecall from $tree into $site (log: $build_log)"
    # The CMake build tree goes to $build_dir, not the checkout's build/.
    if ! (cd "$tree" && "$PY" -m pip install --no-build-isolation --no-deps --no-index \
      --disable-pip-version-check --upgrade --target "$site" -v \
      --config-settings=build-dir="$build_dir/{wheel_tag}" .) >"$build_log" 2>&1; then
      tail -n 80 "$build_log" >&2
      cp "$build_log" "$OUT/" 2>/dev/null || true
      cutecall_error="cutecall build failed (log tail above; full log $build_log, copied to \$OUT)"
      echo "gpu setup: $cutecall_error" >&2
    else
      grep -E "Built wheel|Successfully installed|CMake Warning|warning:" "$build_log" | tail -n 10 || true
      # Import from elsewhere so that no checkout's python/ shadows the site.
      (cd / && "$PY" -c 'import cutecall, cutecall._core; print("cutecall", cutecall.__version__, cutecall.__file__)') ||
        cutecall_error="cutecall installed but does not import"
    fi
  fi
  if [ -n "$handler_pid" ]; then
    step "waiting for the hand-written handler build"
    wait "$handler_pid" || { cat "$log_dir/handler_build.log" >&2; die "handler build failed"; }
    tail -n 1 "$log_dir/handler_build.log"
  fi

  print_versions
  [ -z "$cutecall_error" ] || die "$cutecall_error"
  step "setup done: site $site. Later subcommands use it (CUTECALL_SITE=$site), or: . $site/env.sh"
)

# Device call 2's first half: chunk 0 (stage1.sh) + .whl/part2 -> the site.
install_wheels() {  # SITE STAGE PART2
  local site="$1" stage="$2" part2="$3" work=/tmp/cutecall_wheels
  [ -f "$part2/SHA256SUMS" ] ||
    die "no $part2/SHA256SUMS: this call must carry .whl/part2 (run tools/gpu/fetch_wheels.sh on the dev machine first)"
  local sums="$part2/SHA256SUMS" big_name chunk0="" d want got
  big_name="$(head -n 1 "$sums" | awk '{ print $2 }')"
  for d in "$stage" "$REPO/.whl/part1"; do
    if [ -f "$d/$big_name.chunk0" ]; then chunk0="$d/$big_name.chunk0"; break; fi
  done
  if [ -z "$chunk0" ]; then
    cat >&2 <<EOF

gpu setup: ERROR: STAGE 1 WAS LOST.
  $stage/$big_name.chunk0 is missing: the machine was given back (or restarted)
  between device call 1 and this call, and /tmp went with it.
  Redo both calls back to back:
    1. run(command="bash tools/gpu/stage1.sh", carry=[".whl/part1"])
    2. within ~30 s: run(command="bash tools/gpu/gpu setup && ...", carry=[".whl/part2"])
EOF
    exit 3
  fi

  step "verifying chunks ($chunk0 + $part2/$big_name.chunk1)"
  want="$(awk -v n="$big_name.chunk0" '$2 == n { print $1 }' "$sums")"
  got="$(sha256sum "$chunk0" | cut -d' ' -f1)"
  [ "$want" = "$got" ] || die "chunk0 checksum mismatch (staged $got, expected $want): redo stage1"
  (cd "$part2" && tail -n +2 SHA256SUMS | grep -v '\.chunk0$' | sha256sum -c --quiet -) ||
    die "part2 checksum mismatch: re-run tools/gpu/fetch_wheels.sh and carry .whl/part2 again"

  step "reassembling $big_name"
  rm -rf "$work" && mkdir -p "$work"
  cat "$chunk0" "$part2/$big_name.chunk1" >"$work/$big_name"
  want="$(head -n 1 "$sums" | awk '{ print $1 }')"
  got="$(sha256sum "$work/$big_name" | cut -d' ' -f1)"
  [ "$want" = "$got" ] || die "reassembled $big_name has sha256 $got, expected $want"
  echo "sha256 OK: $got"

  local wheels=("$work/$big_name") f
  for f in "$part2"/*.whl; do
    # tvm-ffi needs typing-extensions>=4.13; keep the device's own if new enough.
    if [[ "$(basename "$f")" == typing_extensions-* ]] && "$PY" -c '
import sys
from importlib.metadata import version
try:
    v = tuple(int(p) for p in version("typing_extensions").split(".")[:2])
except Exception:
    sys.exit(1)
sys.exit(0 if v >= (4, 13) else 1)
'; then
      echo "device typing_extensions is >= 4.13: not installing $(basename "$f")"
      continue
    fi
    wheels+=("$f")
  done

  step "pip install --target $site (${#wheels[@]} wheels)"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --disable-pip-version-check --upgrade --target "$site" "${wheels[@]}"
  rm -rf "$work"
  # Bytecode now, as a normal pip install would: the device sets
  # PYTHONDONTWRITEBYTECODE=1, so without it every import compiles every
  # module again (3-4 s more for the DSL, FA4 and QuACK in each process).
  step "compiling bytecode in $site"
  "$PY" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
  cp "$sums" "$site/.cutecall_wheels.sha256sums"
}

# fa4-jax and its stack (.whl/part2/fa4jax/) -> FA4JAX_SITE, once; then
# an import check with that site first on the path (a warning if it fails).
install_fa4jax() {  # PART2
  local part2="$1" site="${FA4JAX_SITE:-/tmp/fa4jax_site}" sums stamp
  stamp="$site/.cutecall_fa4jax.sha256sums"
  if [ ! -d "$part2/fa4jax" ]; then
    if [ -f "$stamp" ]; then
      step "fa4-jax already installed in $site (no .whl/part2 carried)"
    else
      step "fa4-jax: no .whl/part2/fa4jax carried; bench/attention's fa4_jax path will record that"
      return 0
    fi
  else
    sums="$(grep ' fa4jax/' "$part2/SHA256SUMS" || true)"
    [ -n "$sums" ] || die "$part2/SHA256SUMS lists no fa4jax/ wheels: re-run tools/gpu/fetch_wheels.sh"
    if [ -f "$stamp" ] && [ "$sums" = "$(cat "$stamp")" ]; then
      step "fa4-jax already installed in $site (same wheels): skipping"
    else
      (cd "$part2" && echo "$sums" | sha256sum -c --quiet -) ||
        die "fa4jax wheels: sha256 mismatch; re-run tools/gpu/fetch_wheels.sh and carry .whl/part2 again"
      step "fa4-jax: pip install --target $site (a site of its own: jax-tvm-ffi 0.1.2)"
      rm -rf "$site"
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --disable-pip-version-check --target "$site" "$part2"/fa4jax/*.whl
      "$PY" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
      echo "$sums" >"$stamp"
    fi
  fi
  step "import check: fa4-jax from $site"
  (cd / && PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" "$PY" - <<'EOF') ||
import importlib.metadata as md
import jax_tvm_ffi, cutejax, fa4_jax, fa4_jax.kernels  # noqa: F401
print("fa4-jax", md.version("fa4-jax"), "cutejax", md.version("cutejax"),
      "jax-tvm-ffi", md.version("jax-tvm-ffi"), jax_tvm_ffi.__file__)
EOF
    echo "gpu setup: WARNING: fa4-jax does not import from $site (bench/attention's fa4_jax rows will say why)" >&2
}

print_versions() {
  step "versions"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null ||
    echo "nvidia-smi: unavailable"
  (cd / && "$PY" - <<'EOF') || true
import importlib.metadata as md
import sys

print("python", sys.version.split()[0], sys.executable)
for dist in ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt",
             "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base",
             "nvidia-cutlass-dsl-libs-cu13", "cuda-bindings", "apache-tvm-ffi",
             "jax-tvm-ffi", "torch", "nanobind", "scikit-build-core",
             "typing-extensions", "tqdm", "cutecall"):
    try:
        print(f"{dist:30s} {md.version(dist)}")
    except md.PackageNotFoundError:
        print(f"{dist:30s} (not installed)")
try:
    import jax
    print("jax devices:", jax.devices())
except Exception as e:  # noqa: BLE001
    print("jax devices: ERROR", e)
EOF
  nvcc --version 2>/dev/null | tail -n 2 || echo "nvcc: unavailable"
  cmake --version 2>/dev/null | head -n 1 || true
}
