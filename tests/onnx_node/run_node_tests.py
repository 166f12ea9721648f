"""The ONNX backend node tests, run by dvm's own runner: each model.onnx is
compiled with `dvm compile`, run with `dvm run` on its test inputs, and its
outputs compared with the expected ones (floats within the case's tolerances,
at least rtol 1e-3 atol 1e-4, NaN equal to NaN; integers and bools exactly;
shapes and dtypes exactly; sequences item by item, optionals as their value
or its absence). Inputs and outputs are .pb files: TensorProto, or
SequenceProto / OptionalProto for sequences and optionals.

The data is what gen_node_data.py writes at setup from the installed `onnx`
package (tests/onnx_node/data, with ONNX Runtime's result for each case).
Each test is one of:
  pass         compiled, ran, matched;
  unsupported  dvm refused it at compile time with an explicit
               unsupported-feature error (exit status 2, a message that says
               what is not supported and names the node and op, or the
               graph input/output, that needs it);
  fail         anything else: a wrong answer, a crash, a run-time error, a
               compile error that is not such a refusal.
The run fails (exit 1) when the data is missing, when a test fails that
known_fail.txt does not list (with the reason it fails today: defects to fix,
kept visible), when a listed known failure no longer fails, or when a test
listed in expected_pass.txt does not pass. Tests that pass but are not listed
are reported (add them: --update-expected). It prints totals by op (dvm /
ONNX Runtime); --table prints them as the Markdown table of docs/compiler.md.

usage: run_node_tests.py [--dvm PATH] [--data DIR] [--jobs N] [--sample K]
                         [--update-expected] [--table] [--doc] [--json FILE] [NAME_FILTER...]
--sample K runs every K-th test only; --doc writes the table into
docs/compiler.md between its node-table markers.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
EXPECTED = os.path.join(HERE, "expected_pass.txt")
DOC = os.path.join(ROOT, "docs/compiler.md")
DOC_BEGIN, DOC_END = "<!-- node-table begin -->", "<!-- node-table end -->"
KNOWN_FAIL = os.path.join(HERE, "known_fail.txt")

# An explicit refusal says that something is not supported and where: a node
# ("node "n" (Op, opset 13): ...", or "node "n" (Op): ..." from the importer)
# or a graph input/output/value. Other exit-2 errors (a corrupt file, a shape
# error) are failures.
# The lowering's refusals carry 'node "n" (Op, opset N): '; the importer's
# say "not supported" or "does not support" and name the node, the graph
# input/output or the opset.
LOWERING_REFUSAL = re.compile(r'node "[^"]*" \([A-Za-z0-9_.]+, opset \d+\): ')
REFUSAL = re.compile(r"not supported|does not support|supports only")
PLACE = re.compile(r'node "[^"]*" \([A-Za-z0-9_.]+\)|node \d+ of graph|(input|output) "|'
                   r"opset \d+ of the default domain")


def tolerances(rtol, atol):
    """The case's tolerances, no tighter than rtol 1e-3 atol 1e-4."""
    return max(float(rtol), 1e-3), max(float(atol), 1e-4)


def compare(got, want, rtol=1e-3, atol=1e-4):
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if want.dtype.kind == "f" or "float" in want.dtype.name:  # bfloat16 (ml_dtypes) too
        g, w = got.astype(np.float64), want.astype(np.float64)
        ok = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        if not ok.all():
            i = tuple(np.argwhere(~ok)[0])
            return f"element {i} is {g[i]}, expected {w[i]}"
        return None
    if not np.array_equal(got, want):
        i = tuple(np.argwhere(got != want)[0])
        return f"element {i} is {got[i]}, expected {want[i]}"
    return None


def last_line(text, rc):
    text = text.strip()
    return text.splitlines()[-1] if text else f"exit {rc}"


def sanitizer_report(text):
    """The first line of an AddressSanitizer/UBSan report in text, or None
    (UBSan may report and go on with exit status 0)."""
    for line in text.splitlines():
        if "Sanitizer" in line or "runtime error:" in line:
            return line.strip()
    return None


def run_one(dvm, data_dir, row):
    name = row["test"]
    test_dir = os.path.join(data_dir, name)
    data = os.path.join(test_dir, "test_data_set_0")
    rtol, atol = tolerances(row["rtol"], row["atol"])
    with tempfile.TemporaryDirectory() as tmp:
        mod = os.path.join(tmp, "m.dvmb")
        try:
            r = subprocess.run([dvm, "compile", os.path.join(test_dir, "model.onnx"), "-o", mod],
                               capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return name, "fail", "compile timed out"
        if sanitizer_report(r.stderr):
            return name, "fail", "compile: " + sanitizer_report(r.stderr)
        if r.returncode != 0:
            msg = last_line(r.stderr, r.returncode)
            explicit = r.returncode == 2 and (LOWERING_REFUSAL.search(msg) or
                                              (REFUSAL.search(msg) and PLACE.search(msg)))
            return name, "unsupported" if explicit else "fail", msg
        inputs = sorted((f for f in os.listdir(data) if f.startswith("input_") and f.endswith(".pb")),
                        key=lambda f: int(f[6:-3]))
        outputs = sorted((f for f in os.listdir(data) if f.startswith("output_") and f.endswith(".pb")),
                         key=lambda f: int(f[7:-3]))
        cmd = [dvm, "run", mod, "--threads", "1"]
        for f in inputs:
            cmd += ["--input", os.path.join(data, f)]
        for i in range(len(outputs)):
            cmd += ["--output", os.path.join(tmp, f"out_{i}.pb")]  # .pb: bf16 too
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return name, "fail", "run timed out"
        if sanitizer_report(r.stderr) or r.returncode != 0:
            return name, "fail", "run: " + (sanitizer_report(r.stderr) or last_line(r.stderr, r.returncode))
        kinds = output_kinds(os.path.join(test_dir, "model.onnx"))
        for i, f in enumerate(outputs):
            kind = kinds[i] if i < len(kinds) else "tensor"
            why = compare_values(load_value(os.path.join(tmp, f"out_{i}.pb"), kind),
                                 load_value(os.path.join(data, f), kind), rtol, atol)
            if why:
                return name, "fail", f"output {i}: {why}"
        return name, "pass", ""


def output_kinds(model_path):
    """Per graph output: "tensor", "sequence" or "optional"."""
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    kinds = []
    for o in m.graph.output:
        t = o.type
        kinds.append("sequence" if t.HasField("sequence_type") else "optional" if t.HasField("optional_type")
                     else "tensor")
    return kinds


def load_value(path, kind):
    """A .pb file as NumPy: an array, a list of values (a SequenceProto),
    or a value or None (an OptionalProto; dvm writes optionals as
    SequenceProtos of none or one item, the same wire form)."""
    from onnx import OptionalProto, SequenceProto, TensorProto, numpy_helper
    with open(path, "rb") as fh:
        data = fh.read()
    if kind == "tensor":
        t = TensorProto()
        t.ParseFromString(data)
        return numpy_helper.to_array(t)
    msg = SequenceProto() if kind == "sequence" else OptionalProto()
    msg.ParseFromString(data)
    return proto_value(msg)


def proto_value(msg):
    from onnx import OptionalProto, SequenceProto, numpy_helper
    if isinstance(msg, SequenceProto):
        return [numpy_helper.to_array(t) for t in msg.tensor_values] + \
               [proto_value(s) for s in msg.sequence_values] + [proto_value(o) for o in msg.optional_values]
    if msg.HasField("tensor_value"):
        return numpy_helper.to_array(msg.tensor_value)
    if msg.HasField("sequence_value"):
        return proto_value(msg.sequence_value)
    if msg.HasField("optional_value"):
        return proto_value(msg.optional_value)
    return None


def compare_values(got, want, rtol, atol):
    if want is None or got is None:
        return None if got is None and want is None else f"got {'nothing' if got is None else 'a value'}, " \
            f"expected {'nothing' if want is None else 'a value'}"
    if isinstance(want, list) or isinstance(got, list):
        if not isinstance(want, list) or not isinstance(got, list):
            return "a sequence and a tensor"
        if len(got) != len(want):
            return f"a sequence of {len(got)} items, expected {len(want)}"
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            why = compare_values(g, w, rtol, atol)
            if why:
                return f"item {k}: {why}"
        return None
    return compare(got, want, rtol, atol)


def read_index(data_dir):
    with open(os.path.join(data_dir, "index.tsv")) as f:
        head = f.readline().rstrip("\n").split("\t")
        return [dict(zip(head, line.rstrip("\n").split("\t"))) for line in f if line.strip()]


def read_list(path):
    """{test: the rest of its line} of a list file ('#' starts a comment line)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        rows = [line.strip().split(None, 1) for line in f if line.strip() and not line.startswith("#")]
    return {r[0]: r[1] if len(r) > 1 else "" for r in rows}


def by_op(rows, result):
    """{op: [tests, dvm passes, ORT passes, dvm passes of ORT's]}."""
    t = collections.defaultdict(lambda: [0, 0, 0, 0])
    for r in rows:
        c = t[r["op_type"]]
        dvm, ort = result[r["test"]] == "pass", r["ort"] == "pass"
        c[0] += 1
        c[1] += dvm
        c[2] += ort
        c[3] += dvm and ort
    return t


def table(rows, result, markdown):
    t = by_op(rows, result)
    tot = [sum(c[i] for c in t.values()) for i in range(4)]
    out = []
    if markdown:
        out.append("| op | tests | dvm | ONNX Runtime | dvm of ORT's |")
        out.append("| --- | ---: | ---: | ---: | ---: |")
        for op in sorted(t):
            out.append(f"| {op} | " + " | ".join(str(x) for x in t[op]) + " |")
        out.append("| **all** | " + " | ".join(f"**{x}**" for x in tot) + " |")
    else:
        out.append(f"{'op':28s} {'tests':>5s} {'dvm':>5s} {'ORT':>5s} {'both':>5s}")
        for op in sorted(t):
            out.append(f"{op:28s} " + " ".join(f"{x:5d}" for x in t[op]))
        out.append(f"{'all':28s} " + " ".join(f"{x:5d}" for x in tot))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dvm", default=os.environ.get("DVM", os.path.join(ROOT, "build/tools/dvm")))
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--sample", type=int, default=1, help="run every K-th test only")
    ap.add_argument("--json", help="write per-test results here")
    ap.add_argument("--table", action="store_true", help="print the by-op table as Markdown")
    ap.add_argument("--doc", action="store_true", help="write the table into docs/compiler.md")
    ap.add_argument("--update-expected", action="store_true", help="rewrite expected_pass.txt")
    ap.add_argument("--verbose", action="store_true", help="print every test, not only failures")
    ap.add_argument("filters", nargs="*")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.data, "index.tsv")):
        print(f"run_node_tests: FAILED: no node test data at {args.data}; "
              f"write it with python3 tests/onnx_node/gen_node_data.py (./setup.sh does)")
        return 1
    rows = read_index(args.data)
    partial = args.sample > 1 or bool(args.filters)
    if args.filters:
        rows = [r for r in rows if any(f in r["test"] for f in args.filters)]
    rows = rows[::args.sample]
    expected, known_fail = set(read_list(EXPECTED)), read_list(KNOWN_FAIL)
    known = {r["test"] for r in read_index(args.data)}

    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as ex:
        for name, kind, msg in ex.map(lambda r: run_one(args.dvm, args.data, r), rows):
            results[name] = (kind, msg)
            if kind == "fail" and name in known_fail:
                print(f"known fail   {name}  {msg}")
            elif kind == "fail" or args.verbose:
                print(f"{kind:12s} {name}  {msg}")
    result = {n: k for n, (k, _) in results.items()}

    missing = sorted((expected | set(known_fail)) - known)
    fails = sorted(n for n, k in result.items() if k == "fail" and n not in known_fail)
    fixed = sorted(n for n in known_fail if n in result and result[n] != "fail")
    for n in fixed:
        print(f"NOT FAILING  {n}  (in known_fail.txt, now {result[n]}: remove it there)")
    lost = sorted(n for n in expected if n in result and result[n] != "pass")
    new = sorted(n for n, k in result.items() if k == "pass" and n not in expected)
    for n in lost:
        print(f"REGRESSED    {n}  (in expected_pass.txt): {result[n]}: {results[n][1]}")
    for n in missing:
        print(f"MISSING      {n}  (listed, not in the generated data)")
    for n in new:
        print(f"NEW PASS     {n}  (add it to expected_pass.txt: --update-expected)")

    print(table(rows, result, args.table))
    counts = collections.Counter(result.values())
    ort = {r["test"] for r in rows if r["ort"] == "pass"}
    both = sum(1 for n in ort if result[n] == "pass")
    print(f"onnx node tests: {counts['pass']} pass, {counts['fail']} fail, {counts['unsupported']} unsupported "
          f"of {len(result)}; ONNX Runtime passes {len(ort)}, dvm {both} of those "
          f"({100.0 * both / max(1, len(ort)):.1f}%); {len(fails)} unlisted failures, "
          f"{len(lost)} expected passes lost, {len(new)} new passes")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"test": n, "result": k, "message": m} for n, (k, m) in sorted(results.items())], f, indent=1)
    if (args.update_expected or args.doc) and partial:
        print("run_node_tests: --update-expected and --doc need the whole suite (no filters, no --sample)")
        return 1
    if args.doc:
        with open(DOC) as f:
            doc = f.read()
        head, rest = doc.split(DOC_BEGIN)
        tail = rest.split(DOC_END)[1]
        with open(DOC, "w") as f:
            f.write(head + DOC_BEGIN + "\n" + table(rows, result, True) + "\n" + DOC_END + tail)
        print(f"run_node_tests: wrote the table into {DOC}")
    if args.update_expected:
        with open(EXPECTED, "w") as f:
            f.write("# ONNX node tests that dvm passes; run_node_tests.py fails when one of them does not.\n"
                    "# Regenerate with: python3 tests/onnx_node/run_node_tests.py --update-expected\n")
            for n in sorted(n for n, k in result.items() if k == "pass"):
                f.write(n + "\n")
        print(f"run_node_tests: wrote {EXPECTED}")
    return 1 if fails or fixed or lost or missing else 0


if __name__ == "__main__":
    sys.exit(main())
