"""libdvm's VM knows neither ops nor devices beyond its interfaces
(docs/embedding.md, "Linking and devices"): no file under vm/ includes a
header of ops/, shapefuncs/ or compiler/, and the VM's libraries (dvm_core,
dvm_bc) call no dvm_ function defined outside them, and no C file of vm/
names the CUDA device or a driver call (DLPack's device mapping aside).
Kernels, shape functions and devices reach the VM only through the registry
a module is loaded with.

usage: test_layers.py SOURCE_ROOT LIBRARY.a...
"""
import os
import re
import subprocess
import sys

FORBIDDEN = ("ops/", "shapefuncs/", "compiler/")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)


def include_errors(root):
    errors = []
    vm = os.path.join(root, "vm")
    for dirpath, _, files in os.walk(vm):
        for name in sorted(files):
            if not name.endswith((".c", ".h", ".def")):
                continue
            path = os.path.join(dirpath, name)
            text = open(path, encoding="utf-8").read()
            for m in INCLUDE.finditer(text):
                inc = m.group(1)
                target = os.path.normpath(os.path.join(dirpath, inc))
                outside = not target.startswith(vm + os.sep)
                if inc.startswith(FORBIDDEN) or (inc.startswith("..") and outside):
                    line = text.count("\n", 0, m.start()) + 1
                    errors.append(f"{os.path.relpath(path, root)}:{line}: includes \"{inc}\"")
    return errors


DEVICE = re.compile(r"\bDVM_DEVICE_CUDA\b|\bcu[A-Z]\w*\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", re.S)
DEVICE_MAPPINGS = ("dlpack.c",)  # DLPack's kDLCUDA is dvm's CUDA device


def device_errors(root):
    errors = []
    for dirpath, _, files in os.walk(os.path.join(root, "vm")):
        for name in sorted(files):
            if not name.endswith(".c") or name in DEVICE_MAPPINGS:
                continue
            path = os.path.join(dirpath, name)
            text = open(path, encoding="utf-8").read()
            code = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
            for m in DEVICE.finditer(code):
                line = code.count("\n", 0, m.start()) + 1
                errors.append(f"{os.path.relpath(path, root)}:{line}: names "
                              f"{m.group(0).rstrip('( ')}, a device of its own")
    return errors


def symbol_errors(libs):
    defined, undefined = set(), {}
    for lib in libs:
        out = subprocess.run(["nm", "-A", "--defined-only", lib], capture_output=True,
                             text=True, check=True).stdout
        defined.update(line.split()[-1] for line in out.splitlines() if line.strip())
        out = subprocess.run(["nm", "-A", "--undefined-only", lib], capture_output=True,
                             text=True, check=True).stdout
        for line in out.splitlines():
            where, _, sym = line.rpartition(" ")
            undefined.setdefault(sym, where.split(":")[1] if ":" in where else where)
    return [f"{obj} calls {sym}, which is not the VM's"
            for sym, obj in sorted(undefined.items())
            if sym.startswith("dvm_") and sym not in defined]


def main():
    root, libs = sys.argv[1], sys.argv[2:]
    errors = include_errors(root) + device_errors(root) + symbol_errors(libs)
    for e in errors:
        print(e)
    if errors:
        print(f"FAIL: {len(errors)} reference(s) from vm/ past its interfaces")
        return 1
    print(f"ok: vm/ includes nothing of {', '.join(FORBIDDEN)}, names no device of its own; "
          f"{len(libs)} libraries call only their own dvm_ functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
