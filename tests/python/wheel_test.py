#!/usr/bin/python3
"""`pip install .` as a user does it: builds the wheel from the source tree with meson-python
(pyproject.toml), checks that it carries the Python package alone (and libtether-cuda.so beside
the extension, RUNPATH $ORIGIN, where the build has CUDA), installs it into a fresh venv made
with --system-site-packages (Debian's NumPy and PyTorch), and from outside the source tree, with
no PYTHONPATH, imports tether and tether.torch and runs an exchange of two tether.torch workers.

Run by meson test with the tree's Python (TETHER_SOURCE_DIR, TETHER_VERSION, TETHER_WERROR;
TETHER_CUDA_BIN is nvcc's directory where the tree built the CUDA backend, else empty). Exits 77 (SKIP) when
python3-mesonpy, python3-venv or python3-pip is missing, and says which."""
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path

source = Path(os.environ["TETHER_SOURCE_DIR"]).resolve()
version = os.environ["TETHER_VERSION"]
cuda_bin = os.environ.get("TETHER_CUDA_BIN", "")
werror = os.environ.get("TETHER_WERROR", "false")

missing = [package for module, package in [("mesonpy", "python3-mesonpy"), ("ensurepip", "python3-venv"),
                                           ("pip", "python3-pip")] if importlib.util.find_spec(module) is None]
if missing:
    print(f"SKIP: {sys.executable} lacks {', '.join(missing)} (scripts/install-deps.sh --tests installs them)")
    sys.exit(77)

# What runs in the venv, from a directory outside the source tree.
EXCHANGE = r"""
import concurrent.futures, os, sys
import numpy as np
import torch
import tether, tether.torch

venv, version, has_cuda_library = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
assert tether.__file__.startswith(venv), f"tether imported from {tether.__file__}, not from the venv {venv}"
assert tether.__version__ == version, (tether.__version__, version)
print("tether", tether.__version__, "from", os.path.dirname(tether.__file__), "| torch", torch.__version__)


def exchange(device):
    # Two workers over a model each (a Linear layer: weight and bias); averaging with a window of
    # one: worker i sets its parameters to 1 + 2i, and the round's mean 2 comes back to both.
    models = [torch.nn.Linear(3, 2).to(device) for _ in range(2)]
    x0 = torch.nn.utils.parameters_to_vector(models[0].parameters()).detach().cpu().numpy()
    strategy = {"name": "averaging", "communication_window": 1}
    center = tether.CenterService(x0, strategy=strategy, workers=2, address="tcp://127.0.0.1:*")

    def work(i):
        worker = tether.torch.Worker(models[i], center.address, strategy=strategy, workers=2)
        with torch.no_grad():
            for p in models[i].parameters():
                p.fill_(1.0 + 2.0 * i)
        assert worker.step(8) is True
        worker.finish()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # at once: the center welcomes both or none
        list(pool.map(work, range(2)))  # re-raises a worker's exception here
    final = center.wait()
    # The center sums the x_i as their changes from x~ in float (one vector, not a double's
    # two: docs/architecture.md, "Memory"): the mean is 2 to within two float steps.
    assert np.max(np.abs(final - 2.0)) <= 5e-7, final
    for m in models:
        got = torch.nn.utils.parameters_to_vector(m.parameters()).detach().cpu().numpy()
        assert np.array_equal(got, final), got
    stats = center.stats()
    assert stats["rounds"] == 1 and stats["workers_finished"] == 2, stats
    print(f"2 workers ({device}): x~ = {final.tolist()}, {stats['rounds']} round")


exchange("cpu")
if has_cuda_library:
    if torch.cuda.is_available():
        exchange("cuda")
    else:
        # No GPU: asking for CUDA memory must load libtether-cuda.so from the package and be told
        # that no GPU is visible (without the library the message says it could not be loaded).
        center = tether.CenterService(np.zeros(4, np.float32), workers=1, address="tcp://127.0.0.1:*",
                                      join_timeout_ms=2000)
        a = np.zeros(4, np.float32)
        try:
            tether.connect_pointer(center.address, a.ctypes.data, 4, a, cuda=True, workers=1)
        except tether.TetherError as e:
            assert "no CUDA GPU is visible" in str(e), e
            print("CUDA memory without a GPU:", e)
        else:
            raise AssertionError("a worker over CUDA memory was accepted on a machine without a GPU")
print("OK")
"""


def run(command, **kwargs):
    print("+", " ".join(map(str, command)), flush=True)
    started = time.monotonic()
    subprocess.run(list(map(str, command)), check=True, **kwargs)
    return time.monotonic() - started


def runpath(library):
    dynamic = subprocess.run(["readelf", "-d", str(library)], check=True, capture_output=True, text=True).stdout
    for line in dynamic.splitlines():
        if "(RUNPATH)" in line or "(RPATH)" in line:
            return line.split("[", 1)[1].rstrip("]").split(":")
    return []


work = Path(tempfile.mkdtemp(prefix="tether-wheel-"))
# Meson's build directory: a fresh one per run, a direct child of the source like ./build, so
# that ccache finds the objects scripts/build.sh compiled (Meson writes paths relative to the
# build directory: ../src/...). ./build* is ignored by git.
build = Path(tempfile.mkdtemp(prefix="build-wheel-test.", dir=source))
try:
    # pip as configured by nothing of this machine (no index, links or cache); no PYTHONPATH.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INPUT="1", PIP_NO_CACHE_DIR="1")
    if cuda_bin:
        env["PATH"] = cuda_bin + os.pathsep + env["PATH"]
    # meson-python 0.12 with a given build directory runs `meson setup --reconfigure` when its
    # native file (written into the source) is unchanged, which Meson 1.0 refuses on an empty
    # directory; without the file it configures afresh (and writes the file again).
    (source / ".mesonpy-native-file.ini").unlink(missing_ok=True)
    # The tree's choices, so that the wheel is built as the tree was (and ccache's keys match): CUDA
    # where the tree has it, -Werror where the tree has it (CI). pip 23.0 passes one value per
    # setting, so they go in a machine file.
    options = work / "tree-options.ini"
    options.write_text(f"[built-in options]\nwerror = {werror}\n"
                       f"[project options]\ncuda = '{'enabled' if cuda_bin else 'disabled'}'\n")
    dist = work / "dist"
    built_in = run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", dist,
                    "--config-settings", f"builddir={build}",
                    "--config-settings", f"setup-args=--native-file={options}", source], env=env, cwd=work)
    wheels = list(dist.glob("tether-*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    print(f"wheel: {wheel.name}, {wheel.stat().st_size / 2**20:.2f} MiB, built in {built_in:.1f} s")

    # The package alone: every .py of python/tether, the extension, libtether-cuda.so with CUDA.
    names = zipfile.ZipFile(wheel).namelist()
    print("\n".join("  " + n for n in names))
    extension = "tether/_tether" + sysconfig.get_config_var("EXT_SUFFIX")
    expected = {f"tether/{p.name}" for p in (source / "python" / "tether").glob("*.py")} | {extension}
    if cuda_bin:
        expected.add("tether/libtether-cuda.so")
    package = {n for n in names if not n.startswith(f"tether-{version}.dist-info/")}
    assert package == expected, f"the wheel holds {sorted(package)}, expected {sorted(expected)}"

    unpacked = work / "unpacked"
    zipfile.ZipFile(wheel).extractall(unpacked, members=[extension])
    paths = runpath(unpacked / extension)
    print("RUNPATH of", extension, paths)
    assert "$ORIGIN" in paths, f"{extension} must find libtether-cuda.so beside it: RUNPATH {paths}"
    leaked = [p for p in paths if p.startswith((str(source), str(build), tempfile.gettempdir()))]
    assert not leaked, f"{extension}'s RUNPATH names directories of this build: {leaked}"

    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", venv], env=env)
    python = venv / "bin" / "python"
    # --no-index: numpy (the wheel's one dependency) must be satisfied by Debian's, nothing fetched.
    run([python, "-m", "pip", "install", "--no-index", wheel], env=env, cwd=work)
    script = work / "exchange.py"
    script.write_text(EXCHANGE)
    ran_in = run([python, script, venv, version, "1" if cuda_bin else "0"], env=env, cwd=work, timeout=300)
    print(f"exchange in the venv: {ran_in:.1f} s")
finally:
    shutil.rmtree(build, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
print("PASS")
