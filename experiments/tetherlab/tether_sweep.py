"""`tether sweep` from Python: the directory it gives a run, and running a sweep file."""
import json
import subprocess
import sys


def run_id(assignments, repeat):
    """tether sweep's directory name for a run (src/sweep/sweep_plan.cpp: id_part)."""
    def part(k, v):
        text = v if isinstance(v, str) else json.dumps(v)
        return "".join(c if c.isalnum() or c in ".=-_" else "_" for c in f"{k}={text}")
    return ",".join(part(k, v) for k, v in assignments) + f",repeat={repeat}"


def run_sweep(args, path, sweep):
    """Writes `sweep` to `path` and runs it with tether sweep into the directory beside it
    (args: .tether, .jobs, .assignments, the --set KEY=VALUE of every run)."""
    path.write_text(json.dumps(sweep, indent=2) + "\n")
    command = [args.tether, "sweep", str(path), "--out", str(path.parent), "--jobs", str(args.jobs)]
    for assignment in args.assignments:
        command += ["--set", assignment]
    print("tune:", " ".join(command), flush=True)
    # Exit 1: some runs failed (diverged at too large a rate, say): a result, which the caller
    # scores; a run without a summary.json is the caller's to catch. Anything else: an error.
    code = subprocess.run(command, stdout=subprocess.DEVNULL).returncode
    if code not in (0, 1):
        sys.exit(f"tune: {' '.join(command)} failed (exit {code})")
