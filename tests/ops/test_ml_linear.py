"""The ai.onnx.ml linear models, SVMs and feature preparation ops
(ops/cpu/ml_linear.c, ml_svm.c, ml_prep.c; compiler/lower_ml_linear.c)
against ONNX Runtime: scikit-learn models trained here on small random data
and converted with skl2onnx (zipmap off), and hand-made nodes for what the
converter does not write (post transforms, integer imputation, feature
vectors, malformed attributes). Batches of 0, 1, 13 and 1000 rows (2
threads at 1000); scores within 1e-5 of ONNX Runtime's, labels exact."""
import numpy as np
import pytest
from dvmtest.cli import DvmError, compile_onnx, run_module
from dvmtest.compare import ort_outputs
from dvmtest.onnxmodel import make_model, save_model
from onnx import TensorProto, helper

ML = "ai.onnx.ml"
NFEAT = 7  # a prime, just past a vector of 4
ROWS = (0, 1, 13, 1000)
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)]


def lin_data(rows, seed=0, nfeat=NFEAT):
    return np.random.default_rng(seed).standard_normal((rows, nfeat)).astype(np.float32)


def lin_check(model, tmp_path, feeds_of, rows=ROWS, atol=1e-5):
    """The model compiled and run on feeds_of(n) for each n of rows, against
    ONNX Runtime."""
    path = save_model(model, tmp_path / "m.onnx")
    mod = compile_onnx(path)
    for n in rows:
        feeds = feeds_of(n)
        want = ort_outputs(path, feeds)
        for threads in (1, 2) if n == 1000 else (1,):
            got = run_module(mod, feeds, len(want), threads=threads)
            for g, w in zip(got, want, strict=True):
                assert g.shape == w.shape and g.dtype == w.dtype, (n, g.shape, w.shape, g.dtype, w.dtype)
                if w.dtype.kind == "f":
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol, err_msg=f"{n} rows")
                else:
                    np.testing.assert_array_equal(g, w, err_msg=f"{n} rows")


def lin_targets(kind, rows=120, nfeat=NFEAT):
    x = lin_data(rows, seed=5, nfeat=nfeat)
    s = x[:, 0] - 0.7 * x[:, 1] + 0.3 * x[:, 2] * x[:, 3]
    if kind == "reg":
        return x, s
    if kind == "bin":
        return x, np.where(s > 0, 7, -2).astype(np.int64)
    return x, np.digitize(s, [-0.8, 0, 0.8]).astype(np.int64) * 3 + 1


def lin_sklearn(est, kind, tmp_path, nfeat=NFEAT, rows=ROWS):
    from skl2onnx import to_onnx

    x, y = lin_targets(kind, nfeat=nfeat)
    est.fit(x, y)
    last = est.steps[-1][1] if hasattr(est, "steps") else est
    try:  # classifiers that have probabilities take the option (and need it)
        onx = to_onnx(est, x[:1], options={id(last): {"zipmap": False}}, target_opset={"": 17, ML: 3})
    except NameError:
        onx = to_onnx(est, x[:1], target_opset={"": 17, ML: 3})
    lin_check(onx, tmp_path, lambda n: {onx.graph.input[0].name: lin_data(n, seed=n, nfeat=nfeat)}, rows=rows)
    return onx


def lin_estimators():
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.preprocessing import MinMaxScaler, Normalizer, StandardScaler
    from sklearn.pipeline import make_pipeline
    from sklearn.svm import SVC, SVR, LinearSVC, LinearSVR

    return {
        "logreg-bin": (lambda: LogisticRegression(), "bin"),
        "logreg-multinomial": (lambda: LogisticRegression(), "multi"),
        # ONNX Runtime refuses 0 rows of this one (its ArrayFeatureExtractor gets no indices)
        "logreg-ovr": (lambda: OneVsRestClassifier(LogisticRegression()), "multi", ROWS[1:]),
        "linreg": (lambda: LinearRegression(), "reg"),
        "linsvc-bin": (lambda: LinearSVC(), "bin"),
        "linsvc-multi": (lambda: LinearSVC(), "multi"),
        "linsvr": (lambda: LinearSVR(), "reg"),
        "standard-logreg": (lambda: make_pipeline(StandardScaler(), LogisticRegression()), "multi"),
        "minmax-linreg": (lambda: make_pipeline(MinMaxScaler(), LinearRegression()), "reg"),
        "normalizer-l1-svc": (lambda: make_pipeline(Normalizer(norm="l1"), SVC(kernel="rbf")), "multi"),
        "normalizer-l2-logreg": (lambda: make_pipeline(Normalizer(norm="l2"), LogisticRegression()), "bin"),
        "normalizer-max-linreg": (lambda: make_pipeline(Normalizer(norm="max"), LinearRegression()), "reg"),
    }


@pytest.mark.parametrize("name", list(lin_estimators()))
def test_sklearn_linear(tmp_path, name):
    pytest.importorskip("skl2onnx")
    make, kind, *rows = lin_estimators()[name]
    lin_sklearn(make(), kind, tmp_path, rows=rows[0] if rows else ROWS)


SVMS = [(k, kind, prob) for k in ("linear", "poly", "rbf", "sigmoid") for kind, prob in
        (("bin", False), ("bin", True), ("multi", False), ("multi", True), ("reg", False))]


@pytest.mark.parametrize("kernel,kind,prob", SVMS, ids=[f"{k}-{c}-{'proba' if p else 'votes'}" for k, c, p in SVMS])
def test_sklearn_svm(tmp_path, kernel, kind, prob):
    pytest.importorskip("skl2onnx")
    from sklearn.svm import SVC, SVR

    kw = {"kernel": kernel, "gamma": 0.3, "coef0": 0.5, "degree": 3}
    est = SVR(**kw) if kind == "reg" else SVC(probability=prob, random_state=0, **kw)
    onx = lin_sklearn(est, kind, tmp_path)
    ops = [n.op_type for n in onx.graph.node]
    assert ("SVMRegressor" if kind == "reg" else "SVMClassifier") in ops, ops


def test_one_class_svm(tmp_path):
    """OneClassSVM as skl2onnx writes it (SVMRegressor, then Sign), and the
    regressor's own one_class form (+1 / -1), which skl2onnx does not set."""
    pytest.importorskip("skl2onnx")
    from sklearn.svm import OneClassSVM

    onx = lin_sklearn(OneClassSVM(gamma=0.2, nu=0.3), "reg", tmp_path)
    svr = next(n for n in onx.graph.node if n.op_type == "SVMRegressor")
    svr.attribute.append(helper.make_attribute("one_class", 1))
    lin_check(onx, tmp_path, lambda n: {onx.graph.input[0].name: lin_data(n, seed=n)}, rows=(13,))


def test_imputer_and_column_selection(tmp_path):
    """Columns taken by a ColumnTransformer (ArrayFeatureExtractor), NaN
    replaced by each column's mean or median (Imputer), scaled (Scaler),
    into a LogisticRegression."""
    pytest.importorskip("skl2onnx")
    from skl2onnx import to_onnx
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = lin_targets("multi")
    x[::5, 1] = np.nan
    cols = ColumnTransformer([("a", make_pipeline(SimpleImputer(), StandardScaler()), [0, 1, 3]),
                              ("b", SimpleImputer(strategy="median"), [6, 2])])
    pipe = make_pipeline(cols, LogisticRegression()).fit(x, y)
    onx = to_onnx(pipe, x[:1], options={id(pipe.steps[-1][1]): {"zipmap": False}}, target_opset={"": 17, ML: 3})
    ops = {n.op_type for n in onx.graph.node}
    assert {"ArrayFeatureExtractor", "Imputer", "Scaler", "LinearClassifier"} <= ops, ops

    def feeds(n):
        v = lin_data(n, seed=n)
        v[::3, 1] = np.nan
        return {onx.graph.input[0].name: v}

    lin_check(onx, tmp_path, feeds)


def lin_node_model(op, attrs, x_type=TensorProto.FLOAT, nfeat=NFEAT, outs=None, inputs=None):
    outs = outs or [("label", TensorProto.INT64, ["N"]), ("scores", TensorProto.FLOAT, ["N", None])]
    inputs = inputs or [("X", x_type, ["N", nfeat])]
    node = helper.make_node(op, [i[0] for i in inputs], [o[0] for o in outs], domain=ML, **attrs)
    return make_model([node], inputs, outs, opsets=OPSETS)


POSTS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]


@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize("classes", [1, 2, 4])
def test_linear_classifier_posts(tmp_path, post, classes):
    """Every post transform over 1, 2 and 4 rows of coefficients (one row with
    two labels is ONNX Runtime's binary form); int64 labels; exact zeros for
    SOFTMAX_ZERO."""
    if classes == 1 and post == "PROBIT":
        pytest.skip("PROBIT of one score with two labels: refused (test_refusals)")
    rng = np.random.default_rng(classes)
    coef = rng.standard_normal(classes * NFEAT).astype(np.float32) * 0.2
    coef[:NFEAT] = 0  # class 0 scores its intercept only
    labels = [-5, 9] if classes == 1 else [10 * i - 3 for i in range(classes)]
    icpt = [0.0] + [0.3] * (classes - 1)
    m = lin_node_model("LinearClassifier", dict(coefficients=coef.tolist(), intercepts=icpt, classlabels_ints=labels,
                                                post_transform=post, multi_class=0))
    # PROBIT's float erfinv (ONNX Runtime's) loses digits near 0.5, where the
    # order of the products' sums shows
    lin_check(m, tmp_path, lambda n: {"X": lin_data(n, seed=n) * 2}, rows=(1, 13), atol=1e-4 if post == "PROBIT" else 1e-5)


@pytest.mark.parametrize("post", POSTS)
@pytest.mark.parametrize("targets", [1, 3])
def test_linear_regressor_posts(tmp_path, post, targets):
    rng = np.random.default_rng(targets)
    coef = rng.standard_normal(targets * NFEAT).astype(np.float32) * 0.1
    m = lin_node_model("LinearRegressor", dict(coefficients=coef.tolist(), intercepts=[0.25] * targets,
                                               targets=targets, post_transform=post),
                       outs=[("y", TensorProto.FLOAT, ["N", targets])])
    lin_check(m, tmp_path, lambda n: {"X": lin_data(n, seed=n)}, rows=(0, 1, 13), atol=1e-4 if post == "PROBIT" else 1e-5)


@pytest.mark.parametrize("post", ["LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_svm_posts(tmp_path, post):
    """skl2onnx writes NONE; the others transform the pairs' scores (three
    classes) or turn one score into [1 - s, s] (two)."""
    pytest.importorskip("skl2onnx")
    from skl2onnx import to_onnx
    from sklearn.svm import SVC

    for kind in ("multi", "bin"):
        x, y = lin_targets(kind)
        est = SVC(kernel="rbf", gamma=0.3).fit(x, y)
        onx = to_onnx(est, x[:1], options={id(est): {"zipmap": False}}, target_opset={"": 17, ML: 3})
        for a in next(n for n in onx.graph.node if n.op_type == "SVMClassifier").attribute:
            if a.name == "post_transform":
                a.s = post.encode()
        lin_check(onx, tmp_path, lambda n: {onx.graph.input[0].name: lin_data(n, seed=n)}, rows=(1, 13))


@pytest.mark.parametrize("kind", ["float", "int64"])
@pytest.mark.parametrize("per_column", [True, False])
def test_imputer(tmp_path, kind, per_column):
    if kind == "float":
        vals = [1.5 * i for i in range(NFEAT)] if per_column else [-3.0]
        attrs = dict(imputed_value_floats=vals, replaced_value_float=float("nan") if per_column else 0.5)
        t = TensorProto.FLOAT
    else:
        vals = [100 + i for i in range(NFEAT)] if per_column else [-7]
        attrs = dict(imputed_value_int64s=vals, replaced_value_int64=2)
        t = TensorProto.INT64
    m = lin_node_model("Imputer", attrs, outs=[("Y", t, ["N", NFEAT])], inputs=[("X", t, ["N", NFEAT])])

    def feeds(n):
        rng = np.random.default_rng(n)
        if kind == "float":
            v = rng.integers(-2, 3, (n, NFEAT)).astype(np.float32) * 0.5
            v[::4, 3] = np.nan
            return {"X": v}
        return {"X": rng.integers(0, 4, (n, NFEAT)).astype(np.int64)}

    lin_check(m, tmp_path, feeds)


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer_zero_rows(tmp_path, norm):
    m = lin_node_model("Normalizer", dict(norm=norm), outs=[("Y", TensorProto.FLOAT, ["N", NFEAT])])

    def feeds(n):
        v = lin_data(n, seed=n)
        v[::3] = -np.abs(v[::3])
        v[::3, 2] = 0  # a maximum of 0: the row is copied
        v[1::5] = 0  # a zero norm: copied
        return {"X": v}

    lin_check(m, tmp_path, feeds)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("xshape", [(NFEAT,), (5, NFEAT), (2, 3, NFEAT)])
def test_array_feature_extractor(tmp_path, dtype, xshape):
    t = TensorProto.FLOAT if dtype == np.float32 else TensorProto.INT64
    m = lin_node_model("ArrayFeatureExtractor", {}, outs=[("Z", t, None)],
                       inputs=[("X", t, list(xshape)), ("idx", TensorProto.INT64, [None])])
    x = np.arange(np.prod(xshape)).reshape(xshape).astype(dtype)
    lin_check(m, tmp_path, lambda n: {"X": x, "idx": np.array([6, 0, 3, 3][: max(n, 1) % 5], np.int64)}, rows=(1, 13))
    mod = compile_onnx(save_model(m, tmp_path / "afe.onnx"))
    with pytest.raises(DvmError) as e:
        run_module(mod, {"X": x, "idx": np.array([1, NFEAT], np.int64)})
    assert f"index {NFEAT} (indices[1]) is out of range for {NFEAT} columns" in e.value.message


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_feature_vectorizer(tmp_path, dtype):
    """Inputs of several widths (ONNX Runtime takes one dtype for all), one
    cut to fewer columns and one padded with zeros."""
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    widths = (3, 2, 4, 1)
    ins = [(f"x{i}", t, ["N", w]) for i, w in enumerate(widths)]
    m = lin_node_model("FeatureVectorizer", dict(inputdimensions=[3, 2, 2, 3]), outs=[("Y", TensorProto.FLOAT, ["N", 10])],
                       inputs=ins)

    def feeds(n):
        rng = np.random.default_rng(n)
        return {f"x{i}": (rng.standard_normal((n, w)) * 9).astype(dtype) for i, w in enumerate(widths)}

    lin_check(m, tmp_path, feeds, rows=(1, 13, 1000))


def lin_refused(model, tmp_path, *words):
    path = save_model(model, tmp_path / "bad.onnx")
    with pytest.raises(DvmError) as e:
        compile_onnx(path)
    for w in words:
        assert w in e.value.message, e.value.message


def test_refusals(tmp_path):
    coef = [0.1] * NFEAT
    m = lin_node_model("LinearClassifier", dict(coefficients=coef, intercepts=[0.0], classlabels_ints=[0, 1],
                                                post_transform="PROBIT"))
    lin_refused(m, tmp_path, "PROBIT", "undefined")
    m = lin_node_model("LinearClassifier", dict(coefficients=coef + [0.1, 0.2], intercepts=[0.0, 1.0],
                                                classlabels_ints=[0, 1]))
    lin_refused(m, tmp_path, "9 coefficients for 2 rows")
    m = lin_node_model("LinearClassifier", dict(coefficients=coef, intercepts=[0.0], classlabels_strings=["a", "b"],
                                                classlabels_ints=[0, 1]))
    lin_refused(m, tmp_path, "has both classlabels_ints and classlabels_strings")
    m = lin_node_model("SVMClassifier", dict(coefficients=coef, rho=[0.0], kernel_type="CUBIC", classlabels_ints=[0, 1]))
    lin_refused(m, tmp_path, 'kernel_type "CUBIC"')
    m = lin_node_model("SVMClassifier", dict(coefficients=[0.5, -0.5], rho=[0.0], support_vectors=[0.0] * (3 * NFEAT),
                                             vectors_per_class=[1, 2], classlabels_ints=[0, 1]))
    lin_refused(m, tmp_path, "coefficients, want 3")
    m = lin_node_model("Scaler", dict(offset=[0.0, 1.0], scale=[1.0]), outs=[("Y", TensorProto.FLOAT, None)])
    lin_refused(m, tmp_path, "2 offsets and 1 scales")
    # the encoders without what they map (test_ml_strings.py runs them)
    for op, why in (("LabelEncoder", "needs keys and values, or classes_strings"),
                    ("OneHotEncoder", "needs one of cats_strings and cats_int64s"),
                    ("CategoryMapper", "needs cats_strings and as many cats_int64s")):
        n = helper.make_node(op, ["X"], ["Y"], domain=ML)
        m = make_model([n], [("X", TensorProto.INT64, ["N"])], [("Y", TensorProto.INT64, None)], opsets=OPSETS)
        lin_refused(m, tmp_path, f'({op}, opset 1): {why}')


def test_wrong_feature_count_is_an_error(tmp_path):
    m = lin_node_model("LinearRegressor", dict(coefficients=[0.5] * NFEAT, targets=1),
                       outs=[("y", TensorProto.FLOAT, ["N", 1])], inputs=[("X", TensorProto.FLOAT, ["N", "F"])])
    mod = compile_onnx(save_model(m, tmp_path / "m.onnx"))
    with pytest.raises(DvmError) as e:
        run_module(mod, {"X": lin_data(2, nfeat=NFEAT - 1)})
    assert f"linear_model: X has {NFEAT - 1} features, the coefficients {NFEAT}" in e.value.message
