#!/bin/sh
# Every fixture model compiled with --target cpu,cuda: NVRTC built every
# generated kernel for sm_80, sm_90 and PTX with complete variant tables
# (check_images), and the file's CPU function gives the results of the
# cpu-only file. Skips (77) when NVRTC cannot be loaded.
# usage: test_models.sh images|run DVM CHECK_IMAGES MODELS_DIR FAKE_CUDA_LIB
set -u
mode=$1 dvm=$2 check=$3 models=$4 fake=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for m in mlp bert resnet control; do
  # builds for CUDA leave the cpu_only passes off; attention changes the
  # arithmetic (the scale as the product's alpha, its own exp), and so does
  # conv_winograd (Winograd's tile transforms), so the cpu-only file it is
  # compared with bit for bit is built without them too
  "$dvm" compile "$models/$m.onnx" -o "$tmp/$m.cpu.dvmb" --disable attention --disable conv_winograd || fail=1
  if ! "$dvm" compile "$models/$m.onnx" -o "$tmp/$m.dvmb" --target cpu,cuda 2>"$tmp/err"; then
    if grep -q "NVRTC is not available" "$tmp/err"; then
      echo "SKIP: $(cat "$tmp/err")"
      exit 77
    fi
    cat "$tmp/err"
    fail=1
    continue
  fi
  [ "$mode" = images ] && { "$check" "$tmp/$m.dvmb" || fail=1; }
  # bert's standalone adds, its cast (f32, i64 -> f32) and its transposes
  # (a permuted input, the perm passed on) run as generated kernels, not on
  # the host
  if [ "$mode" = images ] && [ $m = bert ]; then
    "$dvm" disasm "$tmp/$m.dvmb" | sed -n '/^\.func ".*@cuda"/,$p' >"$tmp/bert.cuda.dis"
    grep -q 'invoke *"gen@' "$tmp/bert.cuda.dis" || { echo "bert: no generated kernels"; fail=1; }
    grep -Eq 'invoke +(add|cast|transpose|gather),' "$tmp/bert.cuda.dis" &&
      { echo "bert: add, cast, transpose or gather left on the host"; fail=1; }
    "$dvm" inspect "$tmp/$m.dvmb" | grep -q "inputs: permuted" || { echo "bert: no permuted input"; fail=1; }
    "$dvm" inspect "$tmp/$m.dvmb" | grep -q "gather, 2 inputs" || { echo "bert: no generated gather"; fail=1; }
    # on the stand-in driver the host waits once per call, for the result:
    # the embedding Gather runs on the device, and outputs of host kernels
    # are made on the host, not copied from their device slots
    # (test_standin.py compares the results with the CPU's).
    python3 -c "import numpy as np; np.save('$tmp/ids.npy', np.ones((2, 8), np.int64))"
    DVM_CUDA_DRIVER=$fake DVM_CUBLAS=$fake "$dvm" run "$tmp/$m.dvmb" -i "ids=$tmp/ids.npy" -i "mask=$tmp/ids.npy" \
      --stats >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail=1; }
    grep -q "host_syncs=1 " "$tmp/out" || { echo "bert on the stand-in driver: $(grep stats "$tmp/out")"; fail=1; }
  fi
done
[ "$mode" = images ] && exit $fail
# The CPU function of the cpu,cuda file runs on the CPU as before, with the
# same results (inputs made by make_inputs.py in the models' own shapes).
python3 "$(dirname "$0")/make_inputs.py" "$tmp" || fail=1
for m in mlp bert resnet control; do
  args=$(cat "$tmp/$m.args")
  for f in cpu.dvmb dvmb; do
    # shellcheck disable=SC2086
    if ! "$dvm" run "$tmp/$m.$f" --device cpu $args --output "$tmp/$m.$f.out.npy" 2>"$tmp/err"; then
      cat "$tmp/err"
      # the runtime half registers the CUDA kernels; without them no
      # cpu,cuda file links, which is not this test's to judge
      grep -q "for cuda is not in this dvm's op table" "$tmp/err" &&
        { echo "SKIP: this dvm's op table has no CUDA kernels yet"; exit 77; }
      fail=1
    fi
  done
  cmp "$tmp/$m.cpu.dvmb.out.npy" "$tmp/$m.dvmb.out.npy" || { echo "$m: CPU results differ"; fail=1; }
done
exit $fail
