"""The ai.onnx.ml tree ensembles (ops/cpu/ml.c, compiler/lower_ml.c) against
ONNX Runtime: scikit-learn, LightGBM and XGBoost models trained here on
small random data and converted with skl2onnx and onnxmltools, and hand-made
ensembles for what converters do not write (every node mode, missing-value
tracks, each aggregate and post transform, base values, the _as_tensor
forms). Batches of 0, 1, 13 and 1000 rows (and 2 threads); scores within
1e-5 of ONNX Runtime's, labels exact."""
import numpy as np
import pytest
from dvmtest.cli import DvmError, compile_onnx, run_module
from dvmtest.compare import ort_outputs
from dvmtest.onnxmodel import make_model, save_model
from onnx import TensorProto, helper

ML = "ai.onnx.ml"
BATCHES = (0, 1, 13, 1000)
FEATURES = 6


def ml_data(rows, seed=0):
    x = np.random.default_rng(seed).standard_normal((rows, FEATURES)).astype(np.float32)
    x[::17, 2] = 0.25  # exact ties with thresholds are likely somewhere
    return x


def ml_check(model, tmp_path, batches=BATCHES, nan=False):
    """The model (a ModelProto) compiled and run at each batch, against ONNX
    Runtime; its input is X [N, FEATURES]."""
    path = save_model(model, tmp_path / "m.onnx")
    mod = compile_onnx(path)
    name = model.graph.input[0].name
    for n in batches:
        x = ml_data(n, seed=n)
        if nan:
            x[::3, ::2] = np.nan
        want = ort_outputs(path, {name: x})
        for threads in (1, 2) if n == 1000 else (1,):
            got = run_module(mod, {name: x}, len(want), threads=threads)
            for g, w in zip(got, want, strict=True):
                assert g.shape == w.shape and g.dtype == w.dtype, (n, g.shape, w.shape, g.dtype, w.dtype)
                if w.dtype.kind == "f":
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"batch {n}")
                else:
                    np.testing.assert_array_equal(g, w, err_msg=f"batch {n}")


def ml_targets(kind, rows=300):
    x = ml_data(rows, seed=99)
    s = x[:, 0] + 0.5 * x[:, 1] * x[:, 3] - x[:, 4]
    if kind == "reg":
        return x, s
    if kind == "bin":
        return x, (s > 0).astype(np.int64)
    return x, np.digitize(s, [-1, 0, 1]).astype(np.int64)


SKLEARN = [
    ("DecisionTreeClassifier", "bin", {"max_depth": 5}),
    ("DecisionTreeClassifier", "multi", {"max_depth": 6}),
    ("DecisionTreeRegressor", "reg", {"max_depth": 6}),
    ("RandomForestClassifier", "bin", {"n_estimators": 7, "max_depth": 5}),
    ("RandomForestClassifier", "multi", {"n_estimators": 7, "max_depth": 5}),
    ("RandomForestRegressor", "reg", {"n_estimators": 7, "max_depth": 5}),
    ("ExtraTreesClassifier", "multi", {"n_estimators": 5, "max_depth": 4}),
    ("ExtraTreesRegressor", "reg", {"n_estimators": 5, "max_depth": 4}),
    ("GradientBoostingClassifier", "bin", {"n_estimators": 8, "max_depth": 3}),
    ("GradientBoostingClassifier", "multi", {"n_estimators": 8, "max_depth": 3}),
    ("GradientBoostingRegressor", "reg", {"n_estimators": 8, "max_depth": 3}),
]


@pytest.mark.parametrize("cls,kind,kw", SKLEARN, ids=[f"{c}-{k}" for c, k, _ in SKLEARN])
def test_sklearn_trees(tmp_path, cls, kind, kw):
    pytest.importorskip("skl2onnx")
    import sklearn.ensemble
    import sklearn.tree
    from skl2onnx import to_onnx

    x, y = ml_targets(kind)
    est = getattr(sklearn.ensemble, cls, None) or getattr(sklearn.tree, cls)
    model = est(random_state=0, **kw).fit(x, y)
    opts = {id(model): {"zipmap": False}} if kind != "reg" else None
    ml_check(to_onnx(model, x[:1], options=opts, target_opset={"": 17, ML: 3}), tmp_path)


BOOSTED = [("lightgbm", "bin"), ("lightgbm", "multi"), ("lightgbm", "reg"),
           ("xgboost", "bin"), ("xgboost", "multi"), ("xgboost", "reg")]


@pytest.mark.parametrize("lib,kind", BOOSTED, ids=[f"{a}-{b}" for a, b in BOOSTED])
def test_boosted_trees(tmp_path, lib, kind):
    pytest.importorskip("onnxmltools")
    mod = pytest.importorskip(lib)
    from onnxmltools import convert_lightgbm, convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType

    x, y = ml_targets(kind)
    kw = {"n_estimators": 12, "max_depth": 4, "random_state": 0}
    if lib == "lightgbm":
        est = (mod.LGBMRegressor if kind == "reg" else mod.LGBMClassifier)(num_leaves=9, verbose=-1, **kw)
    else:
        est = (mod.XGBRegressor if kind == "reg" else mod.XGBClassifier)(**kw)
    est.fit(x, y)
    convert = convert_lightgbm if lib == "lightgbm" else convert_xgboost
    extra = {"zipmap": False} if lib == "lightgbm" else {}
    onx = convert(est, initial_types=[("X", FloatTensorType([None, FEATURES]))], target_opset=15, **extra)
    if any(n.op_type == "ZipMap" for n in onx.graph.node):
        pytest.fail("the converter kept ZipMap")
    ml_check(onx, tmp_path, nan=True)


def ml_tree_model(op, post="NONE", agg=None, modes=("BRANCH_LEQ",) * 3, missing=None, bases=None, targets=3,
                  as_tensor=False, labels=None):
    """Two trees of depth 2 over features 0..4 with the given node modes
    (the three branch nodes of each), leaves weighing 2 targets or classes
    each (some negative), as `op` ("TreeEnsembleRegressor" or
    "TreeEnsembleClassifier")."""
    cls = op == "TreeEnsembleClassifier"
    tree, node, feat, val, mode, yes, no = [], [], [], [], [], [], []
    wt, wn, wi, ww = [], [], [], []
    rng = np.random.default_rng(len(modes) + targets)
    for t in range(2):
        # node 0 -> (1, 2); 1 -> leaves 3, 4; 2 -> leaves 5, 6; ids listed out of order
        for i in (0, 2, 1, 3, 4, 5, 6):
            tree.append(t)
            node.append(i)
            branch = i < 3
            tie = i == 1 or (i == 0 and t == 0)  # x[:, 2] meets 0.25 on some rows (ml_data)
            feat.append((2 if tie else (i + 2 * t) % 5) if branch else 0)
            val.append(float(np.float32(0.25 if tie else rng.standard_normal() * 0.5)) if branch else 0.0)
            mode.append(modes[i] if branch else "LEAF")
            yes.append(2 * i + 1 if branch else 0)
            no.append(2 * i + 2 if branch else 0)
            if not branch:
                for k in {i % targets, (i + t) % targets}:
                    wt.append(t)
                    wn.append(i)
                    wi.append(k)
                    ww.append(float(np.float32(rng.standard_normal())))
    kw = dict(nodes_treeids=tree, nodes_nodeids=node, nodes_featureids=feat, nodes_modes=list(mode),
              nodes_truenodeids=yes, nodes_falsenodeids=no, post_transform=post)
    if as_tensor:
        kw["nodes_values_as_tensor"] = helper.make_tensor("v", TensorProto.FLOAT, [len(val)], val)
    else:
        kw["nodes_values"] = val
    if missing is not None:
        kw["nodes_missing_value_tracks_true"] = [missing[i % 7] for i in range(len(tree))]
    if bases is not None:
        kw["base_values"] = bases
    pre = "class" if cls else "target"
    kw.update({f"{pre}_treeids": wt, f"{pre}_nodeids": wn, f"{pre}_ids": wi})
    if as_tensor:
        kw[f"{pre}_weights_as_tensor"] = helper.make_tensor("w", TensorProto.FLOAT, [len(ww)], ww)
    else:
        kw[f"{pre}_weights"] = ww
    if cls:
        kw["classlabels_int64s"] = labels or list(range(10, 10 + targets))
        outs = [("label", TensorProto.INT64, ["N"]), ("scores", TensorProto.FLOAT, ["N", targets])]
    else:
        kw["n_targets"] = targets
        if agg:
            kw["aggregate_function"] = agg
        outs = [("y", TensorProto.FLOAT, ["N", targets])]
    n = helper.make_node(op, ["X"], [o[0] for o in outs], domain=ML, **kw)
    return make_model([n], [("X", TensorProto.FLOAT, ["N", "F"])], outs,
                      opsets=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 3)])


MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


@pytest.mark.parametrize("mode", MODES)
def test_node_modes(tmp_path, mode):
    ml_check(ml_tree_model("TreeEnsembleRegressor", modes=(mode, mode, mode)), tmp_path, batches=(13, 1000))


def test_mixed_modes_and_missing_tracks(tmp_path):
    m = ml_tree_model("TreeEnsembleRegressor", modes=("BRANCH_LT", "BRANCH_GTE", "BRANCH_NEQ"),
                      missing=[1, 0, 1, 0, 0, 0, 0])
    ml_check(m, tmp_path, batches=(13, 1000), nan=True)


@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("targets", [1, 3])
def test_aggregates(tmp_path, agg, targets):
    bases = [0.5, -1.0, 2.0][:targets]
    ml_check(ml_tree_model("TreeEnsembleRegressor", agg=agg, targets=targets, bases=bases), tmp_path,
             batches=(0, 1, 13))


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("op", ["TreeEnsembleRegressor", "TreeEnsembleClassifier"])
def test_post_transforms(tmp_path, post, op):
    m = ml_tree_model(op, post=post, targets=4, as_tensor=post == "SOFTMAX", bases=[0.1, -0.2, 0.3, 0.0])
    ml_check(m, tmp_path, batches=(1, 13))


@pytest.mark.parametrize("bases", [None, [0.3], [0.3, -0.1]])
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC"])
def test_two_classes(tmp_path, bases, post):
    m = ml_tree_model("TreeEnsembleClassifier", post=post, targets=2, bases=bases, labels=[-4, 7])
    ml_check(m, tmp_path, batches=(1, 13))


def ml_refused(model, tmp_path, *words):
    path = save_model(model, tmp_path / "bad.onnx")
    with pytest.raises(DvmError) as e:
        compile_onnx(path)
    for w in words:
        assert w in e.value.message, e.value.message


def test_zipmap_and_string_labels_malformed(tmp_path):
    """ZipMap and string class labels work (test_ml_strings.py); labels given twice are refused."""
    zm = helper.make_node("ZipMap", ["X"], ["z"], domain=ML, classlabels_int64s=[0, 1], classlabels_strings=["a", "b"])
    m = make_model([zm], [("X", TensorProto.FLOAT, ["N", 2])], [("z", TensorProto.FLOAT, None)],
                   opsets=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    ml_refused(m, tmp_path, "ZipMap", "needs one of classlabels_strings and classlabels_int64s")
    m = ml_tree_model("TreeEnsembleClassifier", targets=2)
    m.graph.node[0].attribute.append(helper.make_attribute("classlabels_strings", ["a", "b"]))
    ml_refused(m, tmp_path, "has both classlabels_int64s and classlabels_strings")


def test_malformed_trees_are_refused(tmp_path):
    m = ml_tree_model("TreeEnsembleRegressor")
    a = {x.name: x for x in m.graph.node[0].attribute}
    a["nodes_truenodeids"].ints[1] = 0  # node 2's true child is the root: a cycle
    ml_refused(m, tmp_path, "reached twice")
    m = ml_tree_model("TreeEnsembleRegressor")
    a = {x.name: x for x in m.graph.node[0].attribute}
    a["nodes_falsenodeids"].ints[0] = 42
    ml_refused(m, tmp_path, "false node 42 is not in the tree")
    m = ml_tree_model("TreeEnsembleRegressor")
    a = {x.name: x for x in m.graph.node[0].attribute}
    a["nodes_modes"].strings[0] = b"BRANCH_XX"
    ml_refused(m, tmp_path, "BRANCH_XX")


def test_too_few_features_is_an_error(tmp_path):
    path = save_model(ml_tree_model("TreeEnsembleRegressor"), tmp_path / "m.onnx")
    mod = compile_onnx(path)
    with pytest.raises(DvmError) as e:
        run_module(mod, {"X": np.zeros((2, 3), np.float32)})
    assert "X has 3 features, the trees read feature 4" in e.value.message


@pytest.mark.parametrize("threshold", [0.25, -1.5])
def test_binarizer(tmp_path, threshold):
    n = helper.make_node("Binarizer", ["X"], ["Y"], domain=ML, threshold=threshold)
    m = make_model([n], [("X", TensorProto.FLOAT, ["N", FEATURES])], [("Y", TensorProto.FLOAT, ["N", FEATURES])],
                   opsets=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    ml_check(m, tmp_path)
    mod = compile_onnx(save_model(m, tmp_path / "b.onnx"))
    x = ml_data(3)
    x[1, 4] = np.nan
    with pytest.raises(DvmError) as e:  # as ONNX Runtime refuses it
        run_module(mod, {"X": x})
    assert "binarizer: X element 10 is NaN" in e.value.message


def ml_tree5_model(mode_of, agg=1, post=0, targets=2, missing=False, trees=3, depth=3):
    """TreeEnsemble (ai.onnx.ml opset 5): `trees` full trees of `depth`
    (or of depth(t) for tree t, a function) over features 0..5, node modes mode_of(i) (0..5), each leaf one random
    target and weight; a leaf shared by both children of a node in the
    last tree."""
    rng = np.random.default_rng(trees + targets)
    feat, split, modes, yes, no, yes_leaf, no_leaf, miss, roots = [], [], [], [], [], [], [], [], []
    leaf_t, leaf_w = [], []

    def grow(d, depth):
        i = len(feat)
        feat.append(int(rng.integers(0, FEATURES)))
        split.append(0.25 if feat[-1] == 2 else float(rng.standard_normal() * 0.5))
        modes.append(mode_of(i))
        miss.append(int(rng.integers(0, 2)) if missing else 0)
        for lst in (yes, no, yes_leaf, no_leaf):
            lst.append(0)
        for c, (ids, leafs) in enumerate(((yes, yes_leaf), (no, no_leaf))):
            if d + 1 < depth:
                ids[i] = grow(d + 1, depth)
            else:
                leafs[i] = 1
                ids[i] = len(leaf_t)
                leaf_t.append(int(rng.integers(0, targets)))
                leaf_w.append(float(rng.standard_normal()))
        return i

    for t in range(trees):
        roots.append(grow(0, depth(t) if callable(depth) else depth))
    no[-1], no_leaf[-1] = yes[-1], yes_leaf[-1]  # one leaf, two parents' slots
    kw = dict(tree_roots=roots, nodes_featureids=feat, nodes_truenodeids=yes, nodes_falsenodeids=no,
              nodes_trueleafs=yes_leaf, nodes_falseleafs=no_leaf, leaf_targetids=leaf_t, n_targets=targets,
              aggregate_function=agg, post_transform=post,
              nodes_splits=helper.make_tensor("s", TensorProto.FLOAT, [len(split)], split),
              nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [len(modes)], modes),
              leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, [len(leaf_w)], leaf_w))
    if missing:
        kw["nodes_missing_value_tracks_true"] = miss
    n = helper.make_node("TreeEnsemble", ["X"], ["Y"], domain=ML, **kw)
    return make_model([n], [("X", TensorProto.FLOAT, ["N", FEATURES])], [("Y", TensorProto.FLOAT, ["N", targets])],
                      opsets=[helper.make_opsetid("", 21), helper.make_opsetid(ML, 5)])


@pytest.mark.parametrize("mode", range(6))
def test_tree_ensemble5_modes(tmp_path, mode):
    ml_check(ml_tree5_model(lambda i: mode), tmp_path, batches=(0, 1, 13, 1000))


def test_tree_ensemble5_uneven_depths(tmp_path):
    """Trees of depths 1 to 6 in one forest: below four rows trees walk side
    by side, as long as the deepest of the walk."""
    m = ml_tree5_model(lambda i: 1, trees=19, depth=lambda t: 1 + (t * 7) % 6, targets=3, missing=True)
    ml_check(m, tmp_path, batches=(1, 2, 3, 13), nan=True)


@pytest.mark.parametrize("agg", range(4))
@pytest.mark.parametrize("post", range(5))
def test_tree_ensemble5_aggregates_posts(tmp_path, agg, post):
    m = ml_tree5_model(lambda i: i % 6, agg=agg, post=post, targets=3, missing=True)
    ml_check(m, tmp_path, batches=(1, 13), nan=True)


def test_tree_ensemble5_refusals(tmp_path):
    ml_refused(ml_tree5_model(lambda i: 6 if i == 2 else 0), tmp_path, "BRANCH_MEMBER")
    m = ml_tree5_model(lambda i: 0)
    a = {x.name: x for x in m.graph.node[0].attribute}
    a["nodes_truenodeids"].ints[1] = 0  # node 1's true child is the root: a cycle
    a["nodes_trueleafs"].ints[1] = 0
    ml_refused(m, tmp_path, "reached twice")
