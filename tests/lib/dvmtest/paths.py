"""Where tests find the dvm command and their data: from the environment
meson sets (tests/*/meson.build), else the checkout and its build folder,
so that a plain `python3 -m pytest tests/X` runs from the checkout too."""
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TESTS = os.path.join(ROOT, "tests")
BUILD = os.path.join(ROOT, "build")
DVM = os.environ.get("DVM", os.path.join(BUILD, "tools", "dvm"))
# the fixture models (tests/models/make_models.py) and the assembly programs
MODELS = os.environ.get("DVM_MODELS", os.path.join(TESTS, "models"))
ASM = os.path.join(TESTS, "asm")
# the ONNX node cases that op tests check against (tests/onnx_node/ops_subset.txt;
# setup writes them) and the whole node suite of the shared folder
NODE_SUBSET = os.path.join(TESTS, "onnx_node", "data", "ops_subset")
NODE_SUITE = os.path.join(ROOT, "..", "shared", "onnx-node", "tests")
# models nobody here designed: PyTorch exports (setup.sh) and packaged models
EXPORTED = os.environ.get("DVM_EXPORTED", os.path.join(ROOT, "build-data", "exported"))
REAL_MODELS = os.path.join(TESTS, "real", "models")
