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
# dvm disasm --kernel-source: each generated kernel's CUDA C from its
# payload, as comments, so the text still assembles to the same file
"$dvm" disasm --kernel-source "$tmp/mlp.dvmb" >"$tmp/mlp.dvms" || fail=1
n=$(grep -c '^; kernel [0-9]* "gen@[0-9]*": CUDA C source, [0-9]* bytes$' "$tmp/mlp.dvms")
[ "$n" = 2 ] || { echo "disasm --kernel-source: $n sources, expected 2"; fail=1; }
for want in '__global__ void __launch_bounds__(256) dvm_v0(const dvm_gen_params p)' 'dvm_b(const dvm_gen_params p)'; do
  grep -qF "$want" "$tmp/mlp.dvms" || { echo "disasm --kernel-source lacks: $want"; fail=1; }
done
"$dvm" asm "$tmp/mlp.dvms" -o "$tmp/again.dvmb" && cmp -s "$tmp/mlp.dvmb" "$tmp/again.dvmb" \
  || { echo "disasm --kernel-source does not assemble back to the same file"; fail=1; }
"$dvm" disasm "$tmp/mlp.dvmb" >"$tmp/plain.dvms" || fail=1
grep -q "CUDA C source" "$tmp/plain.dvms" && { echo "sources printed without the option"; fail=1; }
# each generated kernel's payload summed up by the kernel's describe hook
n=$(grep -c '^; elementwise, T=4: variants v0\.\.v3 by n mod 4, then the bounds-checked baseline; configs 0:block 128 x 4 1:block 256 x 4; images sm_80 ([0-9]* bytes) sm_90 ([0-9]* bytes) ptx ([0-9]* bytes)$' "$tmp/plain.dvms")
[ "$n" = 2 ] || { echo "disasm: $n payload summaries, expected 2"; grep '^; ' "$tmp/plain.dvms"; fail=1; }
exit $fail
