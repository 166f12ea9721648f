"""TfIdfVectorizer (ops/cpu/text.c, kernel "tfidf") against ONNX Runtime:
every mode, with and without weights (per n-gram, several n-grams to a
column), skips, unigrams with bigrams and trigrams, i32 and i64 tokens,
rows of 0, 1, 2 and prime lengths, [C] and [B, C] inputs; a pool that repeats
an n-gram, and a pool of strings, are refused."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from dvmtest.cli import dvm, run_module  # noqa: E402
from dvmtest.compare import ort_session  # noqa: E402
from dvmtest.onnxmodel import make_model, save_model  # noqa: E402

rng = np.random.default_rng(11)

POOL = dict(ngram_counts=[0, 4, 10], pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 2, 3, 5, 5, 6, 7],
            ngram_indexes=[6, 1, 2, 3, 4, 5, 0, 7, 2])


def tfidf_model(tmp, name, dtype, shape, **attrs):
    """A TfIdfVectorizer of x as tmp/name.onnx compiled: (its path, the module, the compile's process)."""
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    m = make_model([node], [("x", dtype, shape)], [("y", TensorProto.FLOAT, None)], opset=12, ir_version=8, name=name)
    path = save_model(m, tmp / f"{name}.onnx")
    mod = path.replace(".onnx", ".dvmb")
    return path, mod, dvm("compile", path, "-o", mod)


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("grams,skip", [((1, 1), 0), ((2, 2), 0), ((1, 2), 3), ((1, 3), 1), ((2, 3), 5)])
def test_tfidf_matches_onnxruntime(tmp_path, mode, weights, grams, skip):
    attrs = dict(POOL, mode=mode, min_gram_length=grams[0], max_gram_length=grams[1], max_skip_count=skip)
    if weights:
        attrs["weights"] = [float(w) for w in rng.uniform(0.5, 2.0, 9)]
    for (dtype, np_dtype), dims in zip(((TensorProto.INT32, np.int32), (TensorProto.INT64, np.int64)) * 2,
                                       (["c"], ["c"], ["b", "c"], ["b", "c"])):
        path, mod, p = tfidf_model(tmp_path, "tfidf", dtype, dims, **attrs)
        assert p.returncode == 0, p.stderr
        sess = ort_session(path)
        for shape in [(1,), (13,), (2,), (0,)] if len(dims) == 1 else [(3, 7), (1, 1), (2, 11), (3, 0)]:
            x = rng.integers(2, 9, shape).astype(np_dtype)
            want = sess.run(None, {"x": x})[0]
            got = run_module(mod, [x])[0]
            assert got.shape == want.shape, (shape, got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{shape} {x}")


def test_string_pool_is_refused(tmp_path):
    _, _, p = tfidf_model(tmp_path, "strings", TensorProto.INT64, [4], mode="TF", min_gram_length=1,
                          max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0],
                          pool_strings=["a"])
    assert p.returncode == 2 and "pool_strings" in p.stderr and "TfIdfVectorizer" in p.stderr, p.stderr


def test_repeated_ngram_in_the_pool_is_refused(tmp_path):
    """As ONNX Runtime refuses it ("Duplicate ngram detected")."""
    attrs = dict(ngram_counts=[0, 3], pool_int64s=[2, 3, 2, 2, 3, 2, 3], ngram_indexes=[0, 1, 2, 3, 4], mode="TF",
                 min_gram_length=1, max_gram_length=2, max_skip_count=2)
    _, _, p = tfidf_model(tmp_path, "dup", TensorProto.INT64, ["c"], **attrs)
    assert p.returncode == 2 and "n-gram 2 of the pool repeats an earlier one" in p.stderr, p.stderr
