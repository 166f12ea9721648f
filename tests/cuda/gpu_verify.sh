#!/usr/bin/env bash
# The whole GPU verification, for the first machine with a CUDA device
# (docs/cuda.md, "On a GPU"): builds dvm, runs the whole test suite (the
# GPU tests included, which skip nowhere here), the GPU tests again under
# compute-sanitizer's memcheck, racecheck, synccheck and initcheck, and
# bench/bench_cuda.py, and writes REPORT_DIR/report.md (each step's
# command, exit status, time and the tail of its log) next to the full
# logs. Exits 0 only when every step passed; a step that cannot run (no
# device, no compute-sanitizer, GPU tests or bench that skipped) is
# written down as not run, and counts as a failure: the point of this
# command is to have run everything.
# usage: tests/cuda/gpu_verify.sh [REPORT_DIR]   (default: gpu-report)
# With DVM=PATH it uses that prebuilt dvm instead of building (for a
# machine without dvm's build dependencies, where the binary travels with
# its libraries, LD_LIBRARY_PATH pointing at them): the meson suite does
# not run, test_gpu.py runs on its own (its skip, exit 77, is a failure
# here), and the rest runs as usual.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath -m "${1:-gpu-report}")
mkdir -p "$out"
report=$out/report.md
build=${BUILD_DIR:-build-gpu}
failed=0

step() { # step NAME COMMAND...: runs it, logs it, writes its line in the report
  local name=$1 start rc
  shift
  start=$(date +%s)
  "$@" >"$out/$name.log" 2>&1
  rc=$?
  {
    echo "## $name: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)") in $(($(date +%s) - start)) s"
    echo
    echo '```'
    echo "\$ $*"
    tail -40 "$out/$name.log"
    echo '```'
    echo
  } >>"$report"
  [ $rc -eq 0 ] || failed=$((failed + 1))
  echo "$name: exit $rc"
}

not_run() {
  printf '## %s: NOT RUN\n\n%s\n\n' "$1" "$2" >>"$report"
  failed=$((failed + 1))
  echo "$1: not run: $2"
}

{
  echo "# dvm GPU verification, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo
  echo '```'
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv 2>&1 || echo "no nvidia-smi"
  (nvcc --version | tail -2) 2>&1
  echo '```'
  echo
} >"$report"

sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "${DVM:-}" ]; then
  dvm=$(realpath "$DVM")
  printf '## suite: not run (prebuilt DVM=%s)\n\n' "$DVM" >>"$report"
  step gpu-tests env DVM="$dvm" DVM_MODELS=tests/models python3 tests/cuda/test_gpu.py
else
  step build bash -c "{ [ -d '$build' ] || meson setup '$build'; } && ninja -C '$build'"
  dvm=$build/tools/dvm
fi
if [ -z "${DVM:-}" ] && [ -x "$dvm" ]; then
  # every suite: the unit, cli and cuda suites (the stand-in driver's
  # tests among them) and the gpu suite, which runs here for real
  step suite meson test -C "$build" --print-errorlogs
  # the gpu suite must have run, not skipped (skips pass in meson's count)
  gpu=$(python3 -c "import json,sys; [print(t['result'], (t.get('stdout') or '').strip()[-300:]) for t in map(json.loads, open(sys.argv[1])) if t['name'].endswith('/ cuda_gpu')]" \
        "$build/meson-logs/testlog.json")
  case $gpu in
    OK*) echo "GPU tests (cuda_gpu) ran and passed." >>"$report"; echo >>"$report" ;;
    *) not_run "gpu tests" "cuda_gpu did not pass: ${gpu:-no result}" ;;
  esac
fi
if [ -x "$dvm" ]; then
  for tool in memcheck racecheck synccheck initcheck; do
    if [ -n "$sanitizer" ]; then
      step "sanitizer-$tool" env DVM="$dvm" DVM_MODELS=tests/models "$sanitizer" --tool "$tool" \
        --target-processes all --error-exitcode 99 python3 tests/cuda/test_gpu.py
    else
      not_run "sanitizer-$tool" "compute-sanitizer is not installed (it comes with the CUDA toolkit)"
    fi
  done
  step bench python3 bench/bench_cuda.py --dvm "$dvm"
  grep -q "no CUDA device" "$out/bench.log" && not_run "bench numbers" "bench_cuda.py found no device"
else
  not_run suite "the build failed"
fi
echo "$failed step(s) failed or not run; report: $report" | tee -a "$report"
[ "$failed" -eq 0 ]
