#!/bin/sh
# `dvm inspect` of a cpu,cuda file lists each generated kernel's variant
# table; `dvm compile --target cuda` without NVRTC (DVM_NVRTC_PATH pointing
# nowhere) fails with a clear message and a non-zero exit. The first part
# skips (77) when NVRTC cannot be loaded.
# usage: test_inspect.sh DVM MODELS_DIR
set -u
dvm=$1 models=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
if DVM_NVRTC_PATH=/nonexistent/libnvrtc.so "$dvm" compile "$models/mlp.onnx" -o "$tmp/x.dvmb" \
    --target cuda 2>"$tmp/err"; then
  echo "compile without NVRTC succeeded"; fail=1
fi
grep -q "target cuda: NVRTC is not available: cannot load DVM_NVRTC_PATH=/nonexistent/libnvrtc.so" \
  "$tmp/err" || { echo "unexpected error:"; cat "$tmp/err"; fail=1; }
[ -e "$tmp/x.dvmb" ] && { echo "a file was written anyway"; fail=1; }
if ! "$dvm" compile "$models/mlp.onnx" -o "$tmp/mlp.dvmb" --target cpu,cuda 2>"$tmp/err"; then
  grep -q "NVRTC is not available" "$tmp/err" && { echo "SKIP: $(cat "$tmp/err")"; exit 77; }
  cat "$tmp/err"
  exit 1
fi
"$dvm" inspect "$tmp/mlp.dvmb" >"$tmp/out" || fail=1
for want in "gen@0 (cuda, 5 variants)" "elementwise, 2 inputs, 1 outputs, tile T = 4" \
    "config 0: block 128, 4 per thread" "config 1: block 256, 4 per thread" "inputs: same suffix" \
    "dtypes: f32 f32 -> f32" \
    "images: sm_80 " ", sm_90 " ", PTX " \
    "variants: 0..3 run dvm_v<n mod 4>, 4 runs dvm_b" \
    "matmul@cuda (cuda, 1 variant)" "matmul (cpu, 1 variant)"; do
  grep -qF "$want" "$tmp/out" || { echo "inspect lacks: $want"; fail=1; }
done
[ $fail = 0 ] || cat "$tmp/out"
exit $fail
