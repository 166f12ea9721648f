"""No test helper is defined twice: a module-level function of one Python
file under tests/ has a name no other file there gives a function, so what
tests share lives in one place (dvmtest, or the one file that others
import) and a copy cannot creep back in. Not helpers: tests (test_*),
pytest's hooks (pytest_*), which conftest.py files define per folder, and
the entry point a script's `if __name__ == "__main__":` calls. Not checked:
other projects' scripts kept unchanged (VENDORED)."""
import ast
import collections
import os
import subprocess

import pytest
from dvmtest.paths import ROOT, TESTS


VENDORED = ("tests/python/genai_examples/",)  # ONNX Runtime GenAI's example scripts


def python_files():
    r = subprocess.run(["git", "-C", ROOT, "ls-files", "tests/*.py"], capture_output=True, text=True)
    if r.returncode:
        pytest.skip("not a git checkout: " + r.stderr.strip())
    return sorted(p for p in r.stdout.split() if not p.startswith(VENDORED))


def entry_points(tree):
    """Functions an `if __name__ == "__main__":` block of one statement calls."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) and len(node.body) == 1:
            names |= {c.func.id for c in ast.walk(node.body[0])
                      if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    return names


def helpers(path):
    tree = ast.parse(open(os.path.join(ROOT, path)).read(), path)
    skip = entry_points(tree)
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not n.name.startswith(("test_", "pytest_")) and n.name not in skip]


def test_no_helper_is_defined_twice():
    where = collections.defaultdict(list)
    for path in python_files():
        for name in helpers(path):
            where[name].append(path)
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not twice, "helpers defined in more than one file under tests/ (share one, or name each for " \
        "what it does):\n" + "\n".join(f"  {n}: {', '.join(p)}" for n, p in sorted(twice.items()))


def test_the_scan_sees_the_tests():
    """A broken scan would pass vacuously: it must see the library's helpers
    and the folders' files."""
    files = python_files()
    assert "tests/lib/dvmtest/cli.py" in files and len(files) > 50, files[:5]
    assert "compile_onnx" in helpers("tests/lib/dvmtest/cli.py")
    assert os.path.isdir(TESTS)
