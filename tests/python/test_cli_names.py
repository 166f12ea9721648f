"""python -m dvm run and inspect with tensor and dim names of any characters,
bound as the dvm command binds them (docs/cli.md): NAME=FILE with NAME one
of the function's names ('/' and '=' in it included), --input-name and
--output-name NAME before a FILE taken whole, ambiguity an error; --dim's
name everything before the last '='."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from dvmtest.onnxmodel import make_model
from onnx import TensorProto as T
from onnx import helper as h

import dvm

OUT = json.dumps({"name": "logits", "dims": ["batch", "sequence", "vocabulary"], "source": "a/b=c",
                  "exporter": "torch.onnx 2.5.1", "note": "x" * 11})
A, B = "in/put=x", "ünï cödé ñame"
DIM = "batch_" + "s" * 134


def run_python_m_dvm(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(dvm.__file__)))  # this dvm
    return subprocess.run([sys.executable, "-m", "dvm", *map(str, args)], env=env, capture_output=True, text=True,
                          cwd=cwd)


@pytest.fixture(scope="module")
def names_module(tmp_path_factory):
    d = tmp_path_factory.mktemp("pynames")
    m = dvm.compile(make_model([h.make_node("Sub", [A, B], [OUT])], [(A, T.FLOAT, [DIM, 3]), (B, T.FLOAT, [DIM, 3])],
                               [(OUT, T.FLOAT, None)]))
    m.save(str(d / "names.dvmb"))
    np.save(d / "a.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    os.mkdir(d / "dir=with")
    np.save(d / "dir=with" / "b=1.npy", np.full((2, 3), 5, np.float32))
    return d


def test_names_of_any_characters(names_module):
    d = names_module
    assert len(OUT) == 137
    p = run_python_m_dvm("run", "names.dvmb", "--input", f"{A}=a.npy", "--input-name", B, "--input", "dir=with/b=1.npy",
                         "--output", f"{OUT}=y.npy", cwd=d)
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load(d / "y.npy"), np.arange(6).reshape(2, 3) - 5)
    p = run_python_m_dvm("run", "names.dvmb", "--input-name", A, "--input", "a.npy", "--input-name", B, "--input",
                         "a.npy", "--output-name", OUT, "--output", "z.npy", cwd=d)
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load(d / "z.npy"), np.zeros((2, 3)))


@pytest.mark.parametrize("args, message", [
    (["--input", "in/put=a.npy"], 'has no input named "in/put" (nor is it a file)'),
    (["--input-name", A], f'--input-name "{A}" must be followed by an --input FILE'),
    (["--input-name", "x", "--input", "a.npy"], '--input-name: function "main" has no input named "x"'),
    (["--input", f"{A}=a.npy", "--input-name", A, "--input", "a.npy"], f'input 0 ("{A}") is bound twice'),
])
def test_bad_bindings_say_what_python(names_module, args, message):
    p = run_python_m_dvm("run", "names.dvmb", *args, cwd=names_module)
    assert p.returncode == 2 and message in p.stderr, p.stderr


def test_ambiguous_bindings_are_errors(tmp_path):
    m = dvm.compile(make_model([h.make_node("Sub", ["a", "a=b"], ["y"])], [("a", T.FLOAT, [2]), ("a=b", T.FLOAT, [2])],
                               [("y", T.FLOAT, None)]))
    m.save(str(tmp_path / "m.dvmb"))
    np.save(tmp_path / "b=c.npy", np.array([1, 2], np.float32))
    np.save(tmp_path / "a=x.npy", np.array([10, 20], np.float32))
    p = run_python_m_dvm("run", "m.dvmb", "--input", "a=b=c.npy", "--input", "a=x.npy", cwd=tmp_path)
    assert p.returncode == 2 and 'it starts with the input names "a" and "a=b"' in p.stderr, p.stderr
    p = run_python_m_dvm("run", "m.dvmb", "--input-name", "a=b", "--input", "b=c.npy", "--input", "a=x.npy", cwd=tmp_path)
    assert p.returncode == 2 and 'it starts with the input name "a" and is a file' in p.stderr, p.stderr
    p = run_python_m_dvm("run", "m.dvmb", "--input-name", "a", "--input", "a=x.npy", "--input-name", "a=b", "--input",
                         "b=c.npy", "--output", "y.npy", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), [9, 18])


def test_inspect_dim_by_a_long_name(names_module):
    p = run_python_m_dvm("inspect", "--memory", "names.dvmb", "--dim", f"{DIM}=5", cwd=names_module)
    assert p.returncode == 0 and f"at {DIM}=5: " in p.stdout, p.stderr
