#!/usr/bin/env bash
# Installs everything dvm needs on a fresh Debian 12 machine, builds it, and
# runs an example program end to end. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

packages=(
  build-essential pkg-config meson ninja-build   # the build
  libffi-dev zlib1g-dev libxxhash-dev libdnnl-dev libdlpack-dev # libdvm's libraries
  protobuf-c-compiler libprotobuf-c-dev           # the ONNX importer
  clang libclang-rt-14-dev                        # fuzzers and sanitizers
  libedit-dev tmux                                # dvm repl; its terminal test
  libmicrohttpd-dev libjansson-dev                # dvm serve: HTTP and JSON
  libpcre2-dev libutf8proc-dev                    # the tokenizer: regex patterns, Unicode
  python3 python3-pip                             # fixture generators, references
  python3-torch python3-onnx                      # PyTorch exports of test models (Debian's python3)
  python3-dev python3-venv                        # the Python package (python/)
  python3-matplotlib                              # plots of docs/performance.md (bench, serve load test)
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
python3 -c "import numpy, pytest, onnx, onnxruntime, tritonclient.http, tokenizers, openai, requests, ray.serve, sklearn, skl2onnx, onnxmltools, lightgbm, xgboost, jinja2" 2>/dev/null ||
  python3 -m pip install -q -r requirements.txt 2>/dev/null ||
  python3 -m pip install -q --break-system-packages -r requirements.txt
# The ONNX node suite's data (tests/onnx_node/data), from the installed onnx.
python3 tests/onnx_node/gen_node_data.py
# The ONNX files that the silero-vad and rapidocr-onnxruntime wheels ship.
python3 tests/real/fetch_models.py

# Models as PyTorch exports them, for the tests (generated, never committed).
[ -f build-data/exported/bert_tiny.onnx ] ||
  /usr/bin/python3 tests/exported/export_models.py build-data/exported >/dev/null 2>&1 ||
  { echo "setup: exporting the PyTorch test models failed"; exit 1; }

# ONNX Runtime GenAI (the reference for generation) and its model builder's
# output for tiny random-weight checkpoints of five LLM families, for the
# generation tests: a venv of about 6 GB (PyPI's torch with its CUDA
# libraries; 5-10 minutes on a fresh machine) and 2-3 minutes of building.
if [ ! -f build-data/genai-venv/.dvm-ok ]; then
  echo "setup: ONNX Runtime GenAI and its model builder into build-data/genai-venv (about 6 GB)"
  rm -rf build-data/genai-venv
  python3 -m venv build-data/genai-venv
  build-data/genai-venv/bin/pip install -q -r tests/genai/requirements.txt
  touch build-data/genai-venv/.dvm-ok
fi
build-data/genai-venv/bin/python tests/genai/builder_models.py build-data/genai >/dev/null

[ -d build ] || meson setup build >/dev/null
ninja -C build >/dev/null

echo "setup: built build/tools/dvm; compiling and running the BERT-style fixture model:"
build/tools/dvm compile tests/models/bert.onnx -o build/bert.dvmb --dim batch=1..64 --dim seq=1..64
build/tools/dvm inspect build/bert.dvmb | sed -n '/^function/,$p'
build/tools/dvm run build/bert.dvmb --input ids=examples/bert_ids.npy --input mask=examples/bert_mask.npy

# The Python package as users install it (docs/python.md): `pip install .`
# into build/venv, which builds the project again with meson-python; redone
# when the checkout changed since the last time.
stamp=$( (git rev-parse HEAD; git status --porcelain -- python pyproject.toml meson.build) 2>/dev/null | sha256sum)
if [ "$(cat build/venv/.dvm-stamp 2>/dev/null)" != "$stamp" ]; then
  echo "setup: pip install . into build/venv (builds the Python package; a few minutes)"
  rm -rf build/venv
  python3 -m venv build/venv
  build/venv/bin/pip install -q .
  echo "$stamp" > build/venv/.dvm-stamp
fi
echo "setup: the same model from the installed Python package:"
(cd build && venv/bin/python -m dvm run bert.dvmb --input ids=../examples/bert_ids.npy --input mask=../examples/bert_mask.npy)
