#!/usr/bin/env bash
# Installs everything dvm needs on a fresh Debian 12 machine, builds it, and
# runs an example program end to end. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

packages=(
  build-essential pkg-config meson ninja-build   # the build
  libffi-dev zlib1g-dev libdnnl-dev libdlpack-dev # libdvm's libraries
  protobuf-c-compiler libprotobuf-c-dev           # the ONNX importer
  clang libclang-rt-14-dev                        # fuzzers and sanitizers
  libedit-dev tmux                                # dvm repl; its terminal test
  libmicrohttpd-dev libjansson-dev                # dvm serve: HTTP and JSON
  python3 python3-pip                             # fixture generators, references
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Python packages for fixture generators and reference checks.
python3 -c "import numpy, pytest, onnx, onnxruntime, tritonclient.http" 2>/dev/null ||
  python3 -m pip install -q -r requirements.txt 2>/dev/null ||
  python3 -m pip install -q --break-system-packages -r requirements.txt

[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null

echo "setup: built build/tools/dvm; compiling and running the BERT-style fixture model:"
build/tools/dvm compile tests/models/bert.onnx -o build/bert.dvmb --dim batch=1..64 --dim seq=1..64
build/tools/dvm inspect build/bert.dvmb | sed -n '/^function/,$p'
build/tools/dvm run build/bert.dvmb --input ids=examples/bert_ids.npy --input mask=examples/bert_mask.npy
