"""docs/ names every source file, and only files that exist: each Markdown
table whose first column lists files in backticks belongs to the
directory named (`dir/`) in the nearest heading or paragraph above it
(docs/source.md, compiler.md's table); a name may be a glob (pass_*.c) or
a path below that directory. Every tracked source file of the library,
the compiler, the server, the generator, the command and the Python
package must match a name, and every name a file."""
import fnmatch
import os
import re
import subprocess

import pytest

ROOT = os.environ.get("DVM_SOURCE_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DIRS = ("compiler", "vm", "ops", "shapefuncs", "serve", "gen", "tools", "python")
SOURCE = re.compile(r"\.(c|h|def|proto|py|pyi|typed)$")


def tracked():
    r = subprocess.run(["git", "-C", ROOT, "ls-files", *DIRS], capture_output=True, text=True)
    if r.returncode:
        pytest.skip("not a git checkout: " + r.stderr.strip())
    return {f for f in r.stdout.split() if SOURCE.search(f)}


def tables():
    """(doc, line, dir, name) for every file name in a file table of docs/."""
    rows = []
    docs = os.path.join(ROOT, "docs")
    for doc in sorted(os.listdir(docs)):
        if not doc.endswith(".md"):
            continue
        owner, in_code = None, False
        for no, line in enumerate(open(os.path.join(docs, doc)), 1):
            if line.startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            if not line.startswith("|"):
                dirs = re.findall(r"`([\w/]+)/`", line)
                if dirs:
                    owner = dirs[-1]
                elif line.startswith("#"):
                    owner = None
                continue
            first = line.split("|")[1]
            names = re.findall(r"`([^`]+)`", first)
            if owner and names and all(re.fullmatch(r"[\w./*]+\.\w+", n) for n in names):
                rows += [(doc, no, owner, n) for n in names]
    return rows


def test_every_source_file_is_named():
    named = [os.path.join(d, n) for _, _, d, n in tables()]
    missing = sorted(f for f in tracked() if not any(fnmatch.fnmatchcase(f, p) for p in named))
    assert not missing, f"{len(missing)} source files no table in docs/ names (docs/source.md): {missing}"


def test_every_name_is_a_file():
    files = tracked()
    stale = [f"{doc}:{no}: {d}/{n}" for doc, no, d, n in tables()
             if not any(fnmatch.fnmatchcase(f, os.path.join(d, n)) for f in files)]
    assert not stale, f"names in docs/ tables that match no file: {stale}"


def test_tables_are_found():
    """The tables this test reads exist: a broken heading would make it vacuous."""
    owners = {d for _, _, d, _ in tables()}
    assert set(DIRS) <= {o.split("/")[0] for o in owners}, owners
