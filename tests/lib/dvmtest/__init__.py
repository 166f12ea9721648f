"""What dvm's Python tests share (docs/source.md, "tests/"): paths (the dvm
command and the data folders), cli (`dvm compile`, `dvm asm`, `dvm run` with
arrays in and out), compare (outputs paired strictly, ONNX Runtime as the
reference), onnxmodel (the onnx.helper wrappers) and devices (the devices
present, and the `device` fixture that runs a case on each)."""
