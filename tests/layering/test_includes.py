"""The layering of includes (docs/embedding.md, docs/compiler.md): outside
compiler/, the compiler is reached only through its public header
(compiler/include/dvmc.h), and the clients of libdvm (serve/, python/,
tools/, and gen/, the generator written over its public API) include only
its public headers (vm/include/dvm/). tests/ is left
out: a part's unit tests exercise its internals.

Every quoted or angled #include of every C source and header is resolved
the way the build would find it: beside the including file, then under each
include root of the tree. The tree is DVM_SOURCE_ROOT (default: two folders
up from here)."""
import os
import re
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("DVM_SOURCE_ROOT", Path(__file__).resolve().parents[2]))
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)
SOURCES = (".c", ".h", ".cc", ".cpp", ".inc", ".def")
SKIP = {"tests", ".git"}
CLIENTS = ("serve", "python", "tools", "gen")
# The folders the build names with include_directories for some target.
ROOTS = [ROOT, ROOT / "vm" / "include", ROOT / "vm", ROOT / "compiler" / "include", ROOT / "compiler"]


def c_sources():
    """Every C file of the tree outside tests/ and build folders."""
    for dirpath, dirs, files in os.walk(ROOT):
        here = Path(dirpath)
        dirs[:] = sorted(d for d in dirs if d not in SKIP and not (here / d / "meson-info").is_dir()
                         and not (here == ROOT and d.startswith("build")))
        for f in sorted(files):
            if f.endswith(SOURCES):
                yield here / f


def resolve(src, name):
    """Where #include name in src lands in the tree, or None (a system header)."""
    for base in [src.parent] + ROOTS:
        p = (base / name).resolve()
        if p.is_file() and ROOT.resolve() in p.parents:
            return p.relative_to(ROOT.resolve())
    return None


def includes(under=None):
    """(file, line, name, resolved) of each include of a project header."""
    for src in c_sources():
        rel = src.relative_to(ROOT)
        if under and rel.parts[0] not in under:
            continue
        text = src.read_text(errors="replace")
        for m in INCLUDE.finditer(text):
            target = resolve(src, m.group(1))
            if target:
                yield rel, text.count("\n", 0, m.start()) + 1, m.group(1), target


def test_compiler_only_through_dvmc_h():
    bad = [f"{f}:{line}: #include \"{name}\" ({t})" for f, line, name, t in includes()
           if f.parts[0] != "compiler" and t.parts[0] == "compiler" and t != Path("compiler/include/dvmc.h")]
    assert not bad, "a private compiler header outside compiler/ (use compiler/include/dvmc.h):\n" + "\n".join(bad)


def test_clients_only_public_vm_headers():
    bad = [f"{f}:{line}: #include \"{name}\" ({t})" for f, line, name, t in includes(CLIENTS)
           if t.parts[0] == "vm" and t.parts[:3] != ("vm", "include", "dvm")]
    assert not bad, "a private vm/ header in serve/, python/, tools/ or gen/ (only vm/include/dvm/):\n" + "\n".join(bad)


def test_the_scan_sees_the_tree():
    """The rules above hold because they looked: every client's sources are
    found and their public includes resolved."""
    found = list(includes(CLIENTS))
    assert {f.parts[0] for f, _, _, _ in found} == set(CLIENTS)
    seen = {t for _, _, _, t in found}
    assert Path("compiler/include/dvmc.h") in seen and Path("vm/include/dvm/dvm.h") in seen


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
