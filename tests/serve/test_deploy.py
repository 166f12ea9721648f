"""deploy/: the Dockerfile and the KServe manifests, checked without Docker
or a cluster (this machine has the docker client but no daemon, so neither
the image is built nor the manifests applied here). What can be checked
is: the commands they run start `dvm serve` on a real repository (with the
address moved to 127.0.0.1 and a free port), the ports and probe paths
agree with each other and answer, the runtime image installs the Debian
package of every library the dvm binary links, the build stage's packages
are the ones setup.sh installs, and its meson options and install tag exist;
every option the manifests pass is one `dvm serve --help` lists, and the
generation model's routes the manifest names answer on a generation
model (a tiny GenAI builder folder, when setup has made them)."""
import json
import os
import re
import shutil
import subprocess
import urllib.request

import pytest
import yaml

from conftest import DVM, ROOT, Server

DEPLOY = os.path.join(ROOT, "deploy")


def dockerfile():
    """The Dockerfile's instructions as (stage number, INSTRUCTION, text), continuations joined."""
    text = open(os.path.join(DEPLOY, "Dockerfile")).read().replace("\\\n", " ")
    out, stage = [], -1
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word == "FROM":
            stage += 1
        out.append((stage, word, rest.strip()))
    return out


def apt_packages(cmd):
    m = re.search(r"apt-get install -y (?:--no-install-recommends )?(.*?)(?:&&|$)", cmd)
    return [p for p in m.group(1).split() if not p.startswith("-")] if m else []


def image_args(args, host_flag, port_flag):
    """A container's dvm serve arguments made local: the repository given by
    the test, 127.0.0.1 and any free port (the last --host / --http-port
    given wins, as getopt reads them)."""
    assert args[:2] == ["dvm", "serve"], args
    rest = args[3:]  # the repository is the fixture's
    return rest + [host_flag, "127.0.0.1", port_flag, "0"]


def get(server, path):
    with urllib.request.urlopen(f"http://{server.url}{path}", timeout=30) as r:
        return r.status, r.read().decode()


def start(repo, tmp_path, args):
    return Server(repo, str(tmp_path / "serve.log"), *args)


def test_dockerfile_entrypoint_runs(repo, tmp_path):
    steps = dockerfile()
    entry = [t for st, w, t in steps if w == "ENTRYPOINT"]
    expose = [t for st, w, t in steps if w == "EXPOSE"]
    assert len(entry) == 1 and len(expose) == 1
    args = json.loads(entry[0])
    port = args[args.index("--http-port") + 1]
    assert expose[0] == port  # the port the image says it serves on
    assert args[args.index("--host") + 1] == "0.0.0.0"  # reachable from outside the container
    s = start(repo, tmp_path, image_args(args, "--host", "--http-port"))
    try:
        assert get(s, "/v2/health/ready")[0] == 200
    finally:
        assert s.stop() == 0


def test_dockerfile_build_and_runtime_stages():
    steps = dockerfile()
    setup = open(os.path.join(ROOT, "setup.sh")).read()
    listed = set(re.search(r"packages=\((.*?)\n\)", setup, re.S).group(1).split())
    build_pkgs = [p for st, w, t in steps if st == 0 and w == "RUN" for p in apt_packages(t)]
    runtime_pkgs = [p for st, w, t in steps if st == 1 and w == "RUN" for p in apt_packages(t)]
    assert build_pkgs and runtime_pkgs
    missing = [p for p in build_pkgs if p not in listed]
    assert not missing, f"the image builds with packages setup.sh does not install: {missing}"
    # meson options and the install tag it uses
    build_cmd = " ".join(t for st, w, t in steps if st == 0 and w == "RUN" and "meson setup" in t)
    options = open(os.path.join(ROOT, "meson_options.txt")).read()
    for opt in re.findall(r"-D(\w+)=", build_cmd):
        if opt not in ("buildtype",):  # meson's own
            assert f"option('{opt}'" in options, opt
    tags = re.search(r"--tags (\S+)", build_cmd).group(1)
    build = os.path.join(ROOT, "build")
    if os.path.isdir(os.path.join(build, "meson-info")):
        r = subprocess.run(["meson", "install", "-C", build, "--no-rebuild", "--tags", tags, "--dry-run",
                            "--destdir", "/nonexistent-dvm-dry-run"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert re.search(r"Installing tools/dvm to \S*/bin", r.stdout), r.stdout
        assert "Installing libdvm.so" in r.stdout, r.stdout
    # the runtime stage installs the package of each library dvm links
    needed = subprocess.run(["readelf", "-d", DVM], capture_output=True, text=True, check=True).stdout
    libs = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", needed)
    base = {"libc6", "libgcc-s1", "libstdc++6"}  # in every Debian image
    for lib in libs:
        if lib.startswith(("libdvm", "libasan", "libubsan")):
            continue  # installed by the build stage; a sanitizer build's runtimes
        r = subprocess.run(["dpkg", "-S", lib], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.fail(f"dvm links {lib}, which no Debian package here provides")
        owners = {line.split(":")[0] for line in r.stdout.splitlines() if "/" + lib in line}
        assert owners & (set(runtime_pkgs) | base), f"{lib} ({owners}) is not installed by the runtime stage"


def kserve_docs():
    """deploy/kserve.yaml's runtime and its InferenceServices by name."""
    docs = list(yaml.safe_load_all(open(os.path.join(DEPLOY, "kserve.yaml"))))
    assert sorted(d["kind"] for d in docs) == ["ClusterServingRuntime", "InferenceService", "InferenceService"]
    rt = next(d for d in docs if d["kind"] == "ClusterServingRuntime")
    return rt, {d["metadata"]["name"]: d for d in docs if d["kind"] == "InferenceService"}


def test_kserve_args_are_options():
    """Every option the runtime passes, and each InferenceService appends
    (KServe concatenates the two lists), is one `dvm serve --help` lists."""
    r = subprocess.run([DVM, "serve", "--help"], capture_output=True, text=True)
    listed = set(re.findall(r"^\s+(--[a-z-]+)", r.stdout + r.stderr, re.M))
    assert "--http-port" in listed, r.stdout + r.stderr
    rt, isvcs = kserve_docs()
    for name, isvc in isvcs.items():
        args = rt["spec"]["containers"][0]["args"] + isvc["spec"]["predictor"]["model"].get("args", [])
        for a in args[1:]:
            assert a.split("=")[0] in listed, f"{name}: {a} is not an option of dvm serve"


def test_kserve_llm_routes(tmp_path):
    """The generation InferenceService: dvm serve with its arguments on a
    generation model answers each route its comment names."""
    folder = os.path.join(ROOT, "build-data", "genai", "llama-fp32")
    if not os.path.exists(os.path.join(folder, "genai_config.json")):
        pytest.skip(f"{folder}: setup.sh writes the GenAI builder's tiny folders there")
    rt, isvcs = kserve_docs()
    model = isvcs["llama"]["spec"]["predictor"]["model"]
    assert model["runtime"] == rt["metadata"]["name"]
    text = open(os.path.join(DEPLOY, "kserve.yaml")).read()
    routes = re.findall(r"^\s*#\s+(GET|POST)\s+(/\S+)$", text, re.M)
    assert len(routes) == 5, routes
    repo = tmp_path / "repo"
    shutil.copytree(folder, repo / "llama" / "1", ignore=shutil.ignore_patterns("*.dvmb"))
    cfg_path = repo / "llama" / "1" / "tokenizer_config.json"
    cfg = json.load(open(cfg_path))
    cfg["chat_template"] = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"  # Mistral's form
    json.dump(cfg, open(cfg_path, "w"))
    args = rt["spec"]["containers"][0]["args"][1:] + model["args"]
    local = [a for a in args if not a.startswith(("--host=", "--http-port=", "--cache-dir="))]
    s = start(str(repo), tmp_path, local + ["--host=127.0.0.1", "--http-port=0", f"--cache-dir={tmp_path}/cache"])
    try:
        bodies = {"/v1/completions": {"model": "llama", "prompt": "Hi", "max_tokens": 2},
                  "/v1/chat/completions": {"model": "llama", "messages": [{"role": "user", "content": "Hi"}],
                                           "max_tokens": 2},
                  "/v2/models/llama/generate": {"text_input": "Hi", "parameters": {"max_tokens": 2}},
                  "/v2/models/llama/generate_stream": {"text_input": "Hi", "parameters": {"max_tokens": 2}}}
        for method, path in routes:
            req = urllib.request.Request(f"http://{s.url}{path}", method=method,
                                         data=json.dumps(bodies[path]).encode() if method == "POST" else None)
            with urllib.request.urlopen(req, timeout=60) as r:
                assert r.status == 200 and r.read(), path
    finally:
        assert s.stop() == 0


def test_kserve_manifests(repo, tmp_path):
    rt, isvcs = kserve_docs()
    isvc = isvcs["bert"]
    assert rt["apiVersion"] == "serving.kserve.io/v1alpha1" and isvc["apiVersion"] == "serving.kserve.io/v1beta1"
    model = isvc["spec"]["predictor"]["model"]
    assert model["runtime"] == rt["metadata"]["name"]
    assert model["modelFormat"]["name"] in [f["name"] for f in rt["spec"]["supportedModelFormats"]]
    assert model["protocolVersion"] in rt["spec"]["protocolVersions"] == ["v2"]
    c = rt["spec"]["containers"][0]
    assert c["name"] == "kserve-container"  # the name KServe looks for
    args = c["command"] + c["args"]
    assert args[2] == "/mnt/models"  # where KServe's storage initializer puts the storageUri
    flags = dict(a.split("=", 1) for a in args[3:] if "=" in a)
    port = int(flags["--http-port"])
    assert [p["containerPort"] for p in c["ports"]] == [port]
    assert flags["--host"] == "0.0.0.0"
    ann = isvc["metadata"]["annotations"]
    assert int(ann["prometheus.io/port"]) == port
    probes = [c[k]["httpGet"] for k in ("readinessProbe", "livenessProbe")]
    assert all(p["port"] == port for p in probes)
    local = [a for a in args[3:] if not a.startswith(("--host=", "--http-port="))]
    s = start(repo, tmp_path, local + ["--host=127.0.0.1", "--http-port=0"])
    try:
        for p in probes + [{"path": ann["prometheus.io/path"]}]:
            status, body = get(s, p["path"])
            assert status == 200, p
        assert "dvm_requests_total" in get(s, ann["prometheus.io/path"])[1]
    finally:
        assert s.stop() == 0
