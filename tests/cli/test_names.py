"""Tensor and dim names of any length and any characters in every option of
the dvm command that takes one: run's and repl's --input/--output (NAME=FILE,
and --input-name/--output-name NAME before a FILE taken whole), bench's
--shape, --range and --dim, compile's and inspect's --dim. Names: a
137-character JSON string (one real model names its output so), names
with '/', '=', spaces and non-ASCII letters; dims: a 140-character one."""
import json
import os
import re

import numpy as np
import pytest
from dvmtest.cli import dvm
from dvmtest.onnxmodel import make_model, save_model
from onnx import TensorProto, helper

JSON_NAME = json.dumps({"name": "logits", "dims": ["batch", "sequence", "vocabulary"], "source": "a/b=c",
                        "exporter": "torch.onnx 2.5.1", "note": "x" * 11})
A, B = "in/put=x", "ünï cödé ñame"
SLASHED = "enc/layer.0/out=1"
DIM = "batch_" + "s" * 134


def test_the_json_name_is_137_characters():
    assert len(JSON_NAME) == 137


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    """y = a - b and z = -a: inputs A and B [DIM, 3], outputs JSON_NAME and
    SLASHED, compiled with DIM's range given by --dim; (folder, module)."""
    d = tmp_path_factory.mktemp("names")
    nodes = [helper.make_node("Sub", [A, B], [JSON_NAME]), helper.make_node("Neg", [A], [SLASHED])]
    model = make_model(nodes, [(A, TensorProto.FLOAT, [DIM, 3]), (B, TensorProto.FLOAT, [DIM, 3])],
                       [(JSON_NAME, TensorProto.FLOAT, None), (SLASHED, TensorProto.FLOAT, None)])
    src = save_model(model, d / "named.onnx")
    mod = str(d / "named.dvmb")
    p = dvm("compile", src, "-o", mod, "--dim", f"{DIM}=1..8")
    assert p.returncode == 0, p.stderr
    np.save(d / "a.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    np.save(d / "b.npy", np.ones((2, 3), np.float32))
    os.mkdir(d / "dir=with/")
    np.save(d / "dir=with" / "b=1.npy", np.full((2, 3), 5, np.float32))
    return d, mod


def load_results(d):
    return np.load(d / "y.npy"), np.load(d / "z.npy")


def test_run_binds_names_of_any_characters(named):
    d, mod = named
    p = dvm("run", mod, "--input", f"{B}={d / 'b.npy'}", "--input", f"{A}={d / 'a.npy'}",
            "--output", f"{SLASHED}={d / 'z.npy'}", "--output", f"{JSON_NAME}={d / 'y.npy'}")
    assert p.returncode == 0, p.stderr
    y, z = load_results(d)
    np.testing.assert_array_equal(y, np.arange(6).reshape(2, 3) - 1)
    np.testing.assert_array_equal(z, -np.arange(6).reshape(2, 3))


def test_input_name_takes_the_file_whole(named, monkeypatch):
    """--input-name NAME --input FILE: FILE may hold '=' and start with
    another input's name; nothing is split."""
    d, mod = named
    monkeypatch.chdir(d)
    p = dvm("run", mod, "--input-name", B, "--input", "dir=with/b=1.npy", "--input-name", A, "--input", "a.npy",
            "--output-name", JSON_NAME, "--output", "y.npy", "--output-name", SLASHED, "--output", "z.npy")
    assert p.returncode == 0, p.stderr
    y, _ = load_results(d)
    np.testing.assert_array_equal(y, np.arange(6).reshape(2, 3) - 5)


@pytest.mark.parametrize("args, message", [
    (["--input-name", "in/put", "--input", "a.npy"], '--input-name: function "main" has no input named "in/put"'),
    (["--input-name", A], f'--input-name "{A}" must be followed by an --input FILE'),
    (["--input-name", A, "--input-name", B], f'--input-name "{A}" must be followed by an --input FILE'),
    (["--input", f"{A}=a.npy", "--input-name", A, "--input", "a.npy"], f'input 0 \\("{A}"\\) is bound twice'),
    (["--input", "in/put=a.npy"], 'has no input named "in/put" \\(nor is it a file\\)'),
    (["--output-name", "y", "--output", "y.npy"], '--output-name: function "main" has no output named "y"'),
])
def test_bad_bindings_say_what(named, args, message, monkeypatch):
    d, mod = named
    monkeypatch.chdir(d)
    p = dvm("run", mod, *args)
    assert p.returncode == 2 and re.search(message, p.stderr), p.stderr


def test_ambiguous_name_file_is_an_error(tmp_path, monkeypatch):
    """Inputs "a" and "a=b": "a=b=c.npy" could bind either, and "a=x.npy"
    when that is also a file could be positional: both errors point to
    --input-name, which binds each."""
    model = make_model([helper.make_node("Sub", ["a", "a=b"], ["y"])],
                       [("a", TensorProto.FLOAT, [2]), ("a=b", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT, None)])
    mod = str(tmp_path / "m.dvmb")
    assert dvm("compile", save_model(model, tmp_path / "m.onnx"), "-o", mod).returncode == 0
    monkeypatch.chdir(tmp_path)
    np.save("b=c.npy", np.array([1, 2], np.float32))
    np.save("a=x.npy", np.array([10, 20], np.float32))
    p = dvm("run", mod, "--input", "a=b=c.npy", "--input", "a=x.npy")
    assert p.returncode == 2 and '--input "a=b=c.npy" is ambiguous: it starts with the input names "a" and "a=b"' \
        in p.stderr, p.stderr
    p = dvm("run", mod, "--input-name", "a=b", "--input", "b=c.npy", "--input", "a=x.npy")
    assert p.returncode == 2 and '--input "a=x.npy" is ambiguous: it starts with the input name "a" and is a file' \
        in p.stderr, p.stderr
    p = dvm("run", mod, "--input-name", "a", "--input", "a=x.npy", "--input-name", "a=b", "--input", "b=c.npy",
            "--output", "y.npy")
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load("y.npy"), [9, 18])


def test_bench_shapes_ranges_and_dims_by_any_name(named):
    _, mod = named
    for flags in (["--shape", f"{A}=2x3", "--shape", f"{B}=2x3"], ["--dim", f"{DIM}=4"]):
        p = dvm("bench", mod, *flags, "--iters", "2", "--warmup", "0")
        assert p.returncode == 0 and '"median_ms"' in p.stdout, p.stderr
    p = dvm("bench", mod, "--dim", f"{DIM}=9", "--iters", "2", "--warmup", "0")
    assert p.returncode == 2 and f"({DIM}) must be <= 8, got 9" in p.stderr, p.stderr


def test_compile_and_inspect_dims_by_long_names(named, tmp_path):
    d, mod = named
    p = dvm("inspect", "--memory", mod, "--dim", f"{DIM}=5")
    assert p.returncode == 0 and f"at {DIM}=5: " in p.stdout, p.stderr
    p = dvm("compile", str(d / "named.onnx"), "-o", str(tmp_path / "m.dvmb"), "--dim", f"{DIM}=1..4",
            "--dim", f"{DIM}=2")
    assert p.returncode == 2 and f"dim: {DIM} is given twice" in p.stderr, p.stderr
    p = dvm("compile", str(d / "named.onnx"), "-o", str(tmp_path / "m.dvmb"), "--dim", f"{DIM}x=1..4")
    assert p.returncode == 2 and f'no input of the model has a dim named "{DIM}x"' in p.stderr, p.stderr
    p = dvm("compile", str(d / "named.onnx"), "-o", str(tmp_path / "m.dvmb"), "--dim", "batch size=1")
    assert p.returncode == 2 and "that is not an identifier" in p.stderr, p.stderr


def test_repl_binds_names_of_any_characters(named):
    d, mod = named
    script = d / "script.txt"
    script.write_text("run\n")
    p = dvm("repl", mod, "--input", f"{A}={d / 'a.npy'}", "--input-name", B, "--input", str(d / "dir=with" / "b=1.npy"),
            "--script", script)
    assert p.returncode == 0 and f"  {JSON_NAME}: f32[2,3] min=-5 max=0 " in p.stdout, p.stdout + p.stderr
