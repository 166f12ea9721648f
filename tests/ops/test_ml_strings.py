"""scikit-learn models with string class labels and string categories,
trained here on small random data and converted with skl2onnx, against
ONNX Runtime: labels exact, probabilities within 1e-5. Batches of 0, 1, 13
and 200 rows."""
import numpy as np
import pytest

from dvmtest.cli import compile_onnx, run_module
from dvmtest.compare import ort_outputs
from dvmtest.onnxmodel import save_model

ML = "ai.onnx.ml"
NFEAT = 5
ROWS = (0, 1, 13, 200)
NAMES = np.array(["setosa", "versi\u00e7olor", "", "virginica"])


def mls_features(rows, seed):
    return np.random.default_rng(seed).standard_normal((rows, NFEAT)).astype(np.float32)


def mls_check(onx, tmp_path, feeds_of):
    """onx compiled and run on feeds_of(n) for each n of ROWS against ONNX
    Runtime: text and integers exactly, floats within 1e-5."""
    path = save_model(onx, tmp_path / "m.onnx")
    mod = compile_onnx(path)
    for n in ROWS:
        feeds = feeds_of(n)
        ort_feeds = {k: v.astype(object) if v.dtype.kind == "U" else v for k, v in feeds.items()}
        want = ort_outputs(path, ort_feeds)
        got = run_module(mod, feeds, len(want))
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g.shape == w.shape, (n, i, g.shape, w.shape)
            if w.dtype == object:
                assert g.tolist() == w.tolist(), (n, i)
            elif w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{n} rows, output {i}")
            else:
                assert g.dtype == w.dtype, (n, i, g.dtype, w.dtype)
                np.testing.assert_array_equal(g, w, err_msg=f"{n} rows, output {i}")


def mls_estimators():
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC, LinearSVC
    from sklearn.tree import DecisionTreeClassifier

    return {"logistic": lambda: LogisticRegression(max_iter=500), "linear_svc": lambda: LinearSVC(),
            "svc": lambda: SVC(probability=True, random_state=0), "tree": lambda: DecisionTreeClassifier(max_depth=4),
            "forest": lambda: RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0)}


@pytest.mark.parametrize("classes", [2, 4])
@pytest.mark.parametrize("name", ["logistic", "linear_svc", "svc", "tree", "forest"])
def test_string_class_labels(tmp_path, name, classes):
    """classlabels_strings in LinearClassifier, SVMClassifier and TreeEnsembleClassifier."""
    pytest.importorskip("skl2onnx")
    from skl2onnx import to_onnx

    x = mls_features(160, seed=3)
    s = x[:, 0] - 0.7 * x[:, 1] + 0.3 * x[:, 2] * x[:, 3]
    y = NAMES[np.digitize(s, [-0.8, 0, 0.8][: classes - 1] if classes > 2 else [0.1])]
    est = mls_estimators()[name]().fit(x, y)
    try:
        onx = to_onnx(est, x[:1], options={id(est): {"zipmap": False}}, target_opset={"": 17, ML: 3})
    except NameError:  # no probabilities, no zipmap option
        onx = to_onnx(est, x[:1], target_opset={"": 17, ML: 3})
    mls_check(onx, tmp_path, lambda n: {onx.graph.input[0].name: mls_features(n, seed=n)})


COLORS = np.array(["red", "green", "bl\u00fce", "", "mauve"])


@pytest.mark.parametrize("encoder", ["onehot", "ordinal"])
def test_string_categories_pipeline(tmp_path, encoder):
    """String columns one-hot or ordinal encoded, then a classifier with
    string labels: OneHotEncoder, LabelEncoder or CategoryMapper, and the
    classifier in one graph."""
    pytest.importorskip("skl2onnx")
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder

    rng = np.random.default_rng(11)
    cols = lambda n: rng.choice(COLORS, size=(n, 2))
    c = cols(300)
    y = NAMES[(c[:, 0] == "red") * 2 + (c[:, 1] < "m")]
    enc = OneHotEncoder(handle_unknown="ignore") if encoder == "onehot" else OrdinalEncoder()
    pipe = Pipeline([("enc", enc), ("clf", LogisticRegression(max_iter=500))]).fit(c, y)
    onx = to_onnx(pipe, initial_types=[("c", StringTensorType([None, 2]))],
                  options={id(pipe.steps[-1][1]): {"zipmap": False}}, target_opset={"": 17, ML: 3})
    mls_check(onx, tmp_path, lambda n: {"c": cols(n)})


def test_sklearn_label_encoder(tmp_path):
    """scikit-learn's LabelEncoder on strings: LabelEncoder string -> int64."""
    pytest.importorskip("skl2onnx")
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType
    from sklearn.preprocessing import LabelEncoder

    enc = LabelEncoder().fit(COLORS[:4])
    onx = to_onnx(enc, initial_types=[("s", StringTensorType([None]))], target_opset={"": 17, ML: 2})
    rng = np.random.default_rng(0)
    mls_check(onx, tmp_path, lambda n: {"s": rng.choice(COLORS[:4], size=n)})


def mls_node(op, attrs, x_elem, y_elem, out_rank=None):
    from onnx import helper

    from dvmtest.onnxmodel import make_model, vi

    node = helper.make_node(op, ["x"], ["y"], domain=ML, **attrs)
    return make_model([node], [vi("x", x_elem, ["n", 3])], [vi("y", y_elem, None)],
                      opsets=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 4 if op == "LabelEncoder" else 1)])


@pytest.mark.parametrize("direction", ["to_int", "to_text"])
def test_category_mapper(tmp_path, direction):
    from onnx import TensorProto as T

    cats = {"cats_strings": ["red", "green", "", "bl\u00fce"], "cats_int64s": [4, -1, 7, 2]}
    to_int = direction == "to_int"
    model = mls_node("CategoryMapper", {**cats, "default_int64": 99, "default_string": "?"},
                     T.STRING if to_int else T.INT64, T.INT64 if to_int else T.STRING)
    rng = np.random.default_rng(1)
    pool = np.array(cats["cats_strings"] + ["mauve"]) if to_int else np.array(cats["cats_int64s"] + [5])
    mls_check(model, tmp_path, lambda n: {"x": rng.choice(pool, size=(n, 3))})


@pytest.mark.parametrize("keys,values", [("keys_floats", "values_strings"), ("keys_int64s", "values_floats"),
                                         ("keys_strings", "values_int64s")])
def test_label_encoder_forms(tmp_path, keys, values):
    from onnx import TensorProto as T

    kv = {"keys_floats": [1.5, -0.0, 3.0], "keys_int64s": [3, 1, 2], "keys_strings": ["a", "\u00e9", ""],
          "values_strings": ["x", "", "zz"], "values_floats": [0.25, -1.0, 2.0], "values_int64s": [9, 8, 7]}
    elem = {"floats": T.FLOAT, "int64s": T.INT64, "strings": T.STRING}
    model = mls_node("LabelEncoder", {keys: kv[keys], values: kv[values]}, elem[keys.split("_")[1]],
                     elem[values.split("_")[1]])
    pool = np.array(kv[keys] + ({"keys_floats": [7.0], "keys_int64s": [0], "keys_strings": ["b"]}[keys]),
                    dtype={"keys_floats": np.float32, "keys_int64s": np.int64, "keys_strings": str}[keys])
    rng = np.random.default_rng(2)
    mls_check(model, tmp_path, lambda n: {"x": rng.choice(pool, size=(n, 3))})


@pytest.mark.parametrize("cats", ["cats_strings", "cats_int64s"])
def test_one_hot_encoder(tmp_path, cats):
    from onnx import TensorProto as T

    values = {"cats_strings": ["b", "", "\u00e9", "a"], "cats_int64s": [5, -3, 0, 8]}[cats]
    text = cats == "cats_strings"
    model = mls_node("OneHotEncoder", {cats: values, "zeros": 1}, T.STRING if text else T.INT64, T.FLOAT)
    pool = np.array(values + (["zz"] if text else [4]))
    rng = np.random.default_rng(3)
    mls_check(model, tmp_path, lambda n: {"x": rng.choice(pool, size=(n, 3))})


def test_one_hot_encoder_unknown_refused(tmp_path):
    from onnx import TensorProto as T

    from dvmtest.cli import DvmError

    model = mls_node("OneHotEncoder", {"cats_strings": ["a", "b"], "zeros": 0}, T.STRING, T.FLOAT)
    mod = compile_onnx(save_model(model, tmp_path / "m.onnx"))
    with pytest.raises(DvmError, match="one_hot_encoder: element 4 of X is in no category"):
        run_module(mod, {"x": np.array([["a", "b", "a"], ["b", "c", "a"]])})


def test_zipmap_cli(tmp_path):
    """ZipMap's output in dvm run: the tuple (labels, probabilities), a
    SequenceProto of the two in a .pb; ONNX Runtime's maps are its rows."""
    pytest.importorskip("skl2onnx")
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    x = mls_features(80, seed=6)
    y = NAMES[np.random.default_rng(6).integers(0, 4, 80)]
    onx = to_onnx(LogisticRegression(max_iter=500).fit(x, y), x[:1], target_opset={"": 17, ML: 3})
    path = save_model(onx, tmp_path / "m.onnx")
    feeds = {"X": mls_features(9, seed=9)}
    want = ort_outputs(path, feeds)
    label, (keys, probs) = run_module(compile_onnx(path), feeds, kinds=["tensor", "seq"])
    assert label.tolist() == want[0].tolist()
    got = [dict(zip(keys.tolist(), row)) for row in probs.tolist()]
    assert [list(d) for d in got] == [list(d) for d in want[1]]
    for g, w in zip(got, want[1], strict=True):
        np.testing.assert_allclose(list(g.values()), list(w.values()), rtol=1e-5, atol=1e-6)
