#!/usr/bin/python3
"""The language model of examples/python/language_model.py: its output head is its token
embedding (one tensor), and it trains through tether with 2 worker processes under torchrun's
variables: the validation loss of the center's final model falls below the untrained one, and the
center's state_dict, saved by rank 0, loads strictly into a new model with the tie kept; replica
groups (DDP inside a group of 2 ranks, its leader a tether worker) train it too. Needs
Debian's bible-kjv (scripts/install-deps.sh --tests); exits 77 (a skip) without it. Run by meson
test with PYTHONPATH=build/python:examples/python and TETHER_SOURCE_DIR."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import language_model  # examples/python, on PYTHONPATH
from harness import case, main

EXAMPLE = Path(os.environ["TETHER_SOURCE_DIR"]) / "examples/python/language_model.py"


@case
def the_output_head_is_the_token_embedding():
    model = language_model.LanguageModel(**language_model.PRESETS["tiny"])
    assert model.head.weight is model.tokens.weight
    state = model.state_dict()
    assert state["head.weight"].data_ptr() == state["tokens.weight"].data_ptr()
    # Counted once among the parameters: tether exchanges it once.
    assert sum(p is model.tokens.weight for p in model.parameters()) == 1


@case
def two_tether_workers_lower_the_validation_loss_and_the_center_state_loads_strictly():
    with tempfile.TemporaryDirectory() as d:
        out, saved = Path(d) / "summary.json", Path(d) / "model.pt"
        done = subprocess.run([sys.executable, str(EXAMPLE), "--preset", "tiny", "--steps", "40", "--eval-every", "20",
                               "--mode", "tether", "--processes", "2",
                               "--strategy", '{"name": "diloco", "communication_window": 10}',
                               "--out", str(out), "--save-model", str(saved)],
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        summary = json.loads(out.read_text())
        assert summary["ranks"] == 2 and summary["mode"] == "tether", summary
        untrained = summary["curve"][0]["validation_loss"]
        assert summary["final_validation_loss"] < untrained - 1.0, (untrained, summary["final_validation_loss"])
        state = torch.load(saved)
        assert torch.equal(state["head.weight"], state["tokens.weight"])
        fresh = language_model.LanguageModel(**language_model.PRESETS["tiny"])
        fresh.load_state_dict(state, strict=True)
        assert fresh.head.weight is fresh.tokens.weight  # loading kept the tie
        # The center's x~, not the untrained model: its loss is the one the summary gives.
        corpus = language_model.load_corpus()
        loss = language_model.evaluate(fresh, corpus["validation"], language_model.PRESETS["tiny"]["context"])
        assert abs(loss - summary["final_validation_loss"]) < 1e-4, (loss, summary["final_validation_loss"])


@case
def replica_groups_of_two_train_through_tether_and_lower_the_validation_loss():
    # 4 ranks in 2 groups: DDP inside each group, each group's leader one of the center's 2 workers.
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "summary.json"
        done = subprocess.run([sys.executable, str(EXAMPLE), "--preset", "tiny", "--steps", "40", "--eval-every", "20",
                               "--mode", "tether", "--processes", "4", "--replica-size", "2",
                               "--strategy", '{"name": "diloco", "communication_window": 10}', "--out", str(out)],
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        summary = json.loads(out.read_text())
        assert summary["ranks"] == 4 and summary["replica_size"] == 2, summary
        untrained = summary["curve"][0]["validation_loss"]
        assert summary["final_validation_loss"] < untrained - 1.0, (untrained, summary["final_validation_loss"])


if __name__ == "__main__":
    if shutil.which("bible") is None:
        print("skip: the bible program (Debian's bible-kjv) is missing; scripts/install-deps.sh --tests installs it")
        sys.exit(77)
    sys.exit(main())
