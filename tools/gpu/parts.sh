# shellcheck shell=bash
# `gpu test --part NAME` and `gpu test-parts [NAME...|all]`: the test suite in
# the named parts of tools/gpu/test_parts.txt (plus "rest": every test no
# part names), one pytest process per part, several at once on one machine.
# Sourced by tools/gpu/gpu (use_site, step, die, OUT, PY, REPO).
#
#   bash tools/gpu/gpu test --part attention [PYTEST ARGS...]
#   bash tools/gpu/gpu test-parts --list
#   bash tools/gpu/gpu test-parts all                 # every part at once
#   PART_GPUS="0 1 2 3" bash tools/gpu/gpu test-parts fa4 quack driver
#
# Each part of test-parts runs with XLA_PYTHON_CLIENT_PREALLOCATE=false, its
# own log and junit XML ($OUT/parts/NAME.{log,xml}), and PART_TIMEOUT (540 s).
# PART_GPUS: unset: on a host of several GPUs each part sees them all, in an
# order rotated by one per part (its default device differs: the load spreads,
# and multi-GPU tests still see every GPU); "none": no CUDA_VISIBLE_DEVICES;
# a list ("0 1 2,3"): the parts take its entries in turn. Prints one line per
# part (passed, failed, errors, skipped, seconds); $OUT/parts/summary.txt.

PARTS_FILE="${CUTECALL_TEST_PARTS:-$GPU_TOOLS/test_parts.txt}"  # another list: this tool's tests
declare -A PART_PATHS=()
PART_ORDER=()

load_parts() {
  local name paths
  while read -r name paths; do
    case "$name" in '' | '#'*) continue ;; esac
    PART_PATHS[$name]="$paths"
    PART_ORDER+=("$name")
  done <"$PARTS_FILE"
  PART_ORDER+=(rest)
}

part_args() {  # NAME: the part's pytest arguments, one a line
  local name="$1" p
  if [ "$name" = rest ]; then
    echo tests
    for p in "${PART_ORDER[@]}"; do
      [ "$p" = rest ] && continue
      # shellcheck disable=SC2086  # paths split on spaces
      printf -- '--ignore=%s\n' ${PART_PATHS[$p]}
    done
  elif [ -n "${PART_PATHS[$name]:-}" ]; then
    # shellcheck disable=SC2086
    printf '%s\n' ${PART_PATHS[$name]}
  else
    die "no test part '$name' (parts: ${PART_ORDER[*]})"
  fi
}

gpu_count() {
  nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true
}

part_devices() {  # INDEX: CUDA_VISIBLE_DEVICES for the INDEX-th part ("" leaves it)
  local i="$1" n list
  case "${PART_GPUS-}" in
    none) echo "" ;;
    "")
      n="$(gpu_count)"
      [ "${n:-0}" -gt 1 ] || { echo ""; return; }
      seq 0 $((n - 1)) | awk -v s=$((i % n)) -v n="$n" \
        '{ a[NR - 1] = $1 } END { for (k = 0; k < n; k++) printf "%s%s", (k ? "," : ""), a[(s + k) % n] }'
      ;;
    *)
      read -r -a list <<<"$PART_GPUS"
      echo "${list[$((i % ${#list[@]}))]}"
      ;;
  esac
}

part_summary() {  # NAME RC: one line from the part's junit XML
  "$PY" - "$OUT/parts/$1.xml" "$1" "$2" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET
path, name, rc = sys.argv[1:]
try:
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    n = {k: sum(int(s.get(k, 0)) for s in suites)
         for k in ("tests", "failures", "errors", "skipped")}
    seconds = sum(float(s.get("time", 0)) for s in suites)
    passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
    ok = "ok" if rc == "0" else ("CUT OFF" if rc in ("124", "137") else "FAILED")
    print(f"{name:<18} {ok:<8} {passed:>6} passed {n['failures']:>4} failed "
          f"{n['errors']:>4} errors {n['skipped']:>4} skipped {seconds:>7.1f} s")
except Exception as e:  # no XML: pytest did not finish (cut off, crashed)
    print(f"{name:<18} {'CUT OFF' if rc in ('124', '137') else 'FAILED':<8} "
          f"no junit XML (rc {rc}: {type(e).__name__}); see parts/{name}.log")
PYEOF
}

cmd_test_parts() {
  use_site
  load_parts
  local parts=() p i=0 args devices rc failed=0
  declare -A pids=()
  if [ "${1:-}" = --list ]; then
    for p in "${PART_ORDER[@]}"; do
      printf '%-18s %s\n' "$p" "$(part_args "$p" | tr '\n' ' ')"
    done
    return 0
  fi
  if [ $# -eq 0 ] || [ "$1" = all ]; then parts=("${PART_ORDER[@]}"); else parts=("$@"); fi
  for p in "${parts[@]}"; do part_args "$p" >/dev/null; done  # unknown names: die first
  mkdir -p "$OUT/parts"
  for p in "${parts[@]}"; do
    mapfile -t args < <(part_args "$p")
    devices="$(part_devices "$i")"
    step "part $p${devices:+ (CUDA_VISIBLE_DEVICES=$devices)}: pytest ${args[*]}"
    (
      export XLA_PYTHON_CLIENT_PREALLOCATE=false
      [ -z "$devices" ] || export CUDA_VISIBLE_DEVICES="$devices"
      exec timeout "${PART_TIMEOUT:-540}" "$PY" -m pytest -q -rfs -p no:cacheprovider \
        --junitxml="$OUT/parts/$p.xml" "${args[@]}" >"$OUT/parts/$p.log" 2>&1
    ) &
    pids[$p]=$!
    i=$((i + 1))
  done
  : >"$OUT/parts/summary.txt"
  for p in "${parts[@]}"; do
    wait "${pids[$p]}"
    rc=$?
    [ $rc -eq 0 ] || [ $rc -eq 5 ] || failed=1   # 5: no tests collected
    part_summary "$p" "$rc" | tee -a "$OUT/parts/summary.txt"
  done
  for p in "${parts[@]}"; do  # the failures by name (the logs hold the rest)
    grep -E '^(FAILED|ERROR) ' "$OUT/parts/$p.log" 2>/dev/null | head -n 20 | sed "s/^/[$p] /"
  done
  step "parts done; logs in $OUT/parts/"
  return $failed
}
