#!/usr/bin/python3
"""The language model of examples/python/language_model.py under torchft (torchft.local_sgd.DiLoCo,
each rank a replica group of one, a lighthouse started by the script): DiLoCo and streaming DiLoCo
with 2 ranks lower the validation loss, the summary names the versions of PyTorch and torchft,
and a fragment split that cannot be made is refused by name. torchft needs PyTorch 2.x, which
Debian does not ship: these cases run under the peers' venv (TETHER_PEERS_VENV, default
~/venvs/tether-peers, made by scripts/install-deps.sh --peers) and the test exits 77 (a skip)
where that venv or Debian's bible-kjv is missing. Run by meson test with TETHER_SOURCE_DIR."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import case, main

EXAMPLE = Path(os.environ["TETHER_SOURCE_DIR"]) / "examples/python/language_model.py"
VENV = Path(os.environ.get("TETHER_PEERS_VENV") or Path.home() / "venvs/tether-peers")
PYTHON = VENV / "bin/python"


def run(*args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the venv's own packages only
    env["RUST_LOG"] = "warn"  # torchft's lighthouse and managers log every quorum at info
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        done = subprocess.run([str(PYTHON), str(EXAMPLE), "--preset", "tiny", "--mode", "torchft", "--processes", "2",
                               "--out", str(out), *args], capture_output=True, text=True, timeout=240, env=env)
        return done, (json.loads(out.read_text()) if out.exists() else None)


@case
def torchft_diloco_with_two_ranks_lowers_the_validation_loss():
    done, summary = run("--steps", "60", "--eval-every", "20", "--sync-every", "10")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert summary["mode"] == "torchft" and summary["ranks"] == 2, summary
    assert summary["torch"].startswith("2.") and summary["torchft"], (summary["torch"], summary.get("torchft"))
    untrained = summary["curve"][0]["validation_loss"]
    assert summary["final_validation_loss"] < untrained - 1.0, (untrained, summary["final_validation_loss"])
    assert [p["step"] for p in summary["curve"]] == [0, 20, 40, 60], summary["curve"]


@case
def torchft_streaming_diloco_with_three_fragments_lowers_the_validation_loss():
    done, summary = run("--steps", "60", "--eval-every", "30", "--sync-every", "15", "--fragments", "3",
                        "--fragment-delay", "2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    untrained = summary["curve"][0]["validation_loss"]
    assert summary["final_validation_loss"] < untrained - 1.0, (untrained, summary["final_validation_loss"])


@case
def fragments_the_model_cannot_be_cut_into_are_refused_by_name():
    done, _ = run("--steps", "20", "--sync-every", "10", "--fragments", "5")
    assert done.returncode != 0
    assert "--fragments 5: this model has 4 parts" in done.stderr, done.stderr[-2000:]


if __name__ == "__main__":
    if shutil.which("bible") is None:
        print("skip: the bible program (Debian's bible-kjv) is missing; scripts/install-deps.sh --tests installs it")
        sys.exit(77)
    if not PYTHON.exists() or subprocess.run([str(PYTHON), "-c", "import torchft"], capture_output=True).returncode:
        print(f"skip: no venv with torchft at {VENV} (scripts/install-deps.sh --peers makes one; TETHER_PEERS_VENV)")
        sys.exit(77)
    sys.exit(main())
