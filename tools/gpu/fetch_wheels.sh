#!/usr/bin/env bash
# Download the wheels the GPU machine lacks and split them into two carry sets.
#
#   tools/gpu/fetch_wheels.sh            (run HERE, on the machine with PyPI access)
#
# The GPU machine has no network and no nvidia-cutlass-dsl. Files reach it only
# inside the repository working tree, at most 64 MiB per call, and the CUDA 13
# libs wheel alone is ~92 MB. So the wheels travel in two device calls:
#
#   .whl/part1/  first byte chunk of the cu13 libs wheel          (device call 1)
#   .whl/part2/  second chunk + every other wheel + SHA256SUMS     (device call 2)
#                (fa4-jax and its stack in .whl/part2/fa4jax/: `gpu setup`
#                installs them into a site of their own, /tmp/fa4jax_site,
#                because they pin jax-tvm-ffi 0.1.2 and the main site has 0.1.3)
#
# .whl/dl/ keeps the downloaded wheels themselves (never carried). The split
# point balances the two parts. part1 holds SHA256SUMS.part1 (for stage1.sh)
# and part2 holds SHA256SUMS (the whole cu13 wheel, each chunk, each wheel)
# for `gpu setup` to check. See tools/gpu/README.md for the device-side sequence.
#
# Idempotent: pip skips wheels already in .whl/dl/, and both parts are rebuilt
# from scratch on every run. Environment overrides: PIP (pip command),
# WHL_DIR (default <repo>/.whl).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
whl="${WHL_DIR:-$repo/.whl}"
dl="$whl/dl"
if [ -n "${PIP:-}" ]; then
  read -r -a pip <<<"$PIP"
elif [ -x "$repo/.venv/bin/pip" ]; then
  pip=("$repo/.venv/bin/pip")
else
  pip=(python3 -m pip)
fi

# name==version, one per wheel. The cu13 libs wheel is the one that is split.
CUTLASS_VER=4.8.1
BIG="nvidia-cutlass-dsl-libs-cu13==$CUTLASS_VER"
SMALL=(
  "nvidia-cutlass-dsl==$CUTLASS_VER"           # shim: the .pth file, metadata
  "nvidia-cutlass-dsl-libs-base==$CUTLASS_VER" # cutlass python package
  "nvidia-cutlass-dsl-libs-core==$CUTLASS_VER" # cutlass python package (core)
  "apache-tvm-ffi==0.1.15.post2"               # tvm_ffi, for benchmark path (d)
  "jax-tvm-ffi==0.1.3"                         # jax_tvm_ffi, for path (d)
  "typing-extensions==4.16.0"                  # tvm-ffi needs >=4.13; gpu setup installs it only if the device's is older
  "quack-kernels==0.6.5"                       # the third-party corpus (tests/external, bench/external)
  "flash-attn-4==4.0.0b36"                     # the third-party corpus: module flash_attn.cute
  "torch-c-dlpack-ext==0.1.5"                  # flash-attn-4 and quack import it
  "tqdm==4.70.1"                               # cutecall's progress bars (a dependency; pure Python)
  "liger-kernel==0.8.5"                        # the corpus: Liger's CuTe DSL ops (pure Python, 0.9 MiB)
  "nvidia-cutlass-operators==0.3.0"            # the corpus: the Operator API's sm90 GEMM (0.6 MiB; networkx comes with torch)
  "nvidia-cudnn-frontend==1.32.0"              # the corpus: cuDNN's sm90 block-sparse attention (11.1 MiB)
)
# bench/attention's fa4_jax path: a site of their own on the device
# (/tmp/fa4jax_site): cutejax excludes jax-tvm-ffi 0.1.3, the main site's.
FA4JAX=(
  "fa4-jax==0.1.0"                             # FA4's kernels from JAX through cutejax
  "cutejax==0.1.5"                             # fa4-jax's kernel caller (TVM-FFI targets)
  "jax-tvm-ffi==0.1.2"                         # cutejax: jax-tvm-ffi!=0.1.3
  "jaxtyping==0.3.11"                          # fa4-jax's annotations
  "wadler-lindig==0.1.8"                       # jaxtyping's one dependency
)

download() {
  "${pip[@]}" download --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any \
    --progress-bar off -q -d "$dl" "$@"
}

# The file pip saved for NAME==VER (wheel names use underscores, any case).
wheel_file() {
  local spec="$1" name ver
  name="${spec%%==*}"; ver="${spec#*==}"
  name="$(echo "$name" | tr '[:upper:]-' '[:lower:]_')"
  local f
  for f in "$dl"/*.whl; do
    local base lower
    base="$(basename "$f")"
    lower="$(echo "$base" | tr '[:upper:]' '[:lower:]')"
    if [[ "$lower" == "${name}-${ver}-"* ]]; then
      echo "$f"; return 0
    fi
  done
  echo "fetch_wheels.sh: no wheel for $spec in $dl" >&2
  return 1
}

size_of() { stat -c %s "$1"; }
mib() { awk -v b="$1" 'BEGIN { if (b < 1048576) printf "%.0f KiB", b / 1024; else printf "%.1f MiB", b / 1048576 }'; }

mkdir -p "$dl"
echo "== downloading into $dl"
download "$BIG" "${SMALL[@]}"
download "${FA4JAX[@]}"  # apart: pip refuses two pins of jax-tvm-ffi in one resolve

big_file="$(wheel_file "$BIG")"
big_name="$(basename "$big_file")"
big_size="$(size_of "$big_file")"
small_files=()
small_total=0
for spec in "${SMALL[@]}"; do
  f="$(wheel_file "$spec")"
  small_files+=("$f")
  small_total=$((small_total + $(size_of "$f")))
done
fa4jax_files=()
for spec in "${FA4JAX[@]}"; do
  f="$(wheel_file "$spec")"
  fa4jax_files+=("$f")
  small_total=$((small_total + $(size_of "$f")))
done

# Split point: make part1 (chunk 0) and part2 (chunk 1 + small wheels) equal.
cut=$(((big_size + small_total + 1) / 2))
if [ "$cut" -ge "$big_size" ]; then cut=$((big_size / 2)); fi

echo "== splitting $big_name ($(mib "$big_size")) at byte $cut"
rm -rf "$whl/part1" "$whl/part2"
mkdir -p "$whl/part1" "$whl/part2"
chunk0="$whl/part1/$big_name.chunk0"
chunk1="$whl/part2/$big_name.chunk1"
head -c "$cut" "$big_file" >"$chunk0"
tail -c +"$((cut + 1))" "$big_file" >"$chunk1"
for f in "${small_files[@]}"; do cp "$f" "$whl/part2/"; done
mkdir -p "$whl/part2/fa4jax"
for f in "${fa4jax_files[@]}"; do cp "$f" "$whl/part2/fa4jax/"; done

# Sanity: the chunks must rebuild the wheel byte for byte.
big_sha="$(sha256sum "$big_file" | cut -d' ' -f1)"
cat_sha="$(cat "$chunk0" "$chunk1" | sha256sum | cut -d' ' -f1)"
if [ "$big_sha" != "$cat_sha" ]; then
  echo "fetch_wheels.sh: chunks do not rebuild $big_name" >&2
  exit 1
fi

(cd "$whl/part1" && sha256sum -- *.chunk0 >SHA256SUMS.part1)
{
  echo "$big_sha  $big_name"
  (cd "$whl/part1" && sha256sum -- *.chunk0)
  (cd "$whl/part2" && sha256sum -- *.chunk1 *.whl fa4jax/*.whl)
} >"$whl/part2/SHA256SUMS"

# The CUDA 12 flavour (`gpu cu12`, a third call): its libs wheel is as big
# as cu13's, so it travels as one xz tarball of the wheel's files (about
# 62 MiB, checked against its sha256 on the device). Made once: xz -9 takes
# minutes.
cu12_spec="nvidia-cutlass-dsl-libs-cu12==$CUTLASS_VER"
cu12_tar="$whl/cu12/nvidia_cutlass_dsl_libs_cu12-$CUTLASS_VER.tar.xz"
if [ ! -f "$whl/cu12/SHA256SUMS" ] || ! (cd "$whl/cu12" && sha256sum -c --quiet SHA256SUMS); then
  download "$cu12_spec"
  cu12_whl="$(wheel_file "$cu12_spec")"
  unpacked="$(mktemp -d)"
  python3 -m zipfile -e "$cu12_whl" "$unpacked"
  mkdir -p "$whl/cu12"
  (cd "$unpacked" && tar -cf - . | xz -9 -T0 >"$cu12_tar.tmp") && mv "$cu12_tar.tmp" "$cu12_tar"
  rm -rf "$unpacked"
  (cd "$whl/cu12" && sha256sum -- "$(basename "$cu12_tar")" >SHA256SUMS)
fi

# What one device call would carry: the working tree that travels anyway
# (tracked + untracked-not-ignored files) plus one part.
tree_bytes=0
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  tree_bytes="$(cd "$repo" && git ls-files -z -co --exclude-standard |
    xargs -0 -r stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')"
fi
p1="$(du -sb "$whl/part1" | cut -f1)"
p2="$(du -sb "$whl/part2" | cut -f1)"
p3="$(du -sb "$whl/cu12" | cut -f1)"

echo
echo "== wheels"
for f in "$big_file" "${small_files[@]}"; do
  printf '  %-12s %s\n' "$(mib "$(size_of "$f")")" "$(basename "$f")"
done
for f in "${fa4jax_files[@]}"; do
  printf '  %-12s fa4jax/%s\n' "$(mib "$(size_of "$f")")" "$(basename "$f")"
done
echo
echo "== carry sets (limit 64 MiB per call, working tree included)"
printf '  .whl/part1  %-12s -> call 1 carries %s with the tree\n' "$(mib "$p1")" "$(mib $((p1 + tree_bytes)))"
printf '  .whl/part2  %-12s -> call 2 carries %s with the tree\n' "$(mib "$p2")" "$(mib $((p2 + tree_bytes)))"
printf '  .whl/cu12   %-12s -> call 3 (gpu cu12) carries %s with the tree\n' "$(mib "$p3")" "$(mib $((p3 + tree_bytes)))"
printf '  working tree that travels anyway: %s\n' "$(mib "$tree_bytes")"
limit=$((63 * 1048576))
for p in "$p1" "$p2" "$p3"; do
  if [ $((p + tree_bytes)) -gt "$limit" ]; then
    echo "WARNING: a call would carry more than 63 MiB; shrink the working tree" >&2
  fi
done
echo
ls -l "$whl/part1" "$whl/part2" "$whl/part2/fa4jax"
