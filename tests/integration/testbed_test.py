"""experiments/testbed: a center and two workers, each in its own network namespace at
50 Mbit/s, run tether to the end; the self-check measures every link within 10% of the set
rate; the same run with the center's link cut for 12 s ends complete; and the testbed leaves no namespace, link, cgroup or marker behind, neither after the
run nor when stopped by SIGTERM in the middle of one; a kill schedule (kills, churn) kills the workers' hosts
and starts them again, and the run ends complete. Exit 77 without root, ip netns or tc.

Run by meson with Debian's python3; TETHER_BIN and TETHER_SOURCE_DIR come from the suite."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
SOURCE = os.environ.get("TETHER_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
TESTBED = os.path.join(SOURCE, "experiments", "testbed", "testbed.py")
TETHER = os.environ.get("TETHER_BIN", os.path.join(SOURCE, "build", "tether"))
RATE = 50

CONFIG = {  # small enough to finish in seconds on 2 cores; the point is the network, not the model
    "name": "testbed-test",
    "data": {"source": "synthetic", "train_samples": 8000, "validation_samples": 1000, "test_samples": 1000,
             "features": 784, "classes": 10},
    "model": {"hidden_layers": [256]},  # 203,530 parameters: 0.8 MB a message, ~20 MB over the center's link
    "training": {"epochs": 1, "batch_size": 64, "threads": 1, "seed": 1,
                 "optimizer": {"name": "adam", "learning_rate": 0.001}},
    "strategy": {"name": "adag", "communication_window": 5},
    "cluster": {"workers": 2},
}


def spec(programs):
    return {"name": "testbed-test", "hosts": ["center", "w0", "w1"], "link": {"rate_mbit": RATE}, "timeout_s": 60,
            "programs": programs, "collect": ["run/summary.json"]}


TETHER_PROGRAMS = [
    {"name": "center", "hosts": ["center"],
     # The testbed's namespaces reach no one else: no keys (a server beyond loopback needs them or this).
     "argv": ["{tether}", "server", "--config", "{config}", "--bind", "tcp://{addr}:5555", "--out", "{cell}/run",
              "--set", "security.insecure=true"]},
    {"name": "worker", "hosts": ["w0", "w1"],
     "argv": ["{tether}", "worker", "--config", "{config}", "--connect", "tcp://{addr_center}:5555"]},
]


def state():
    """What a run could leave behind: namespaces, root-namespace links, tbed cgroups."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    cgroups = [d for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/cpu") if os.path.isdir(root)
               for d in os.listdir(root) if d.startswith("tbed")]
    return ({line.split()[0] for line in netns.splitlines() if line.strip()},
            {line.split(":")[1].strip().split("@")[0] for line in links.splitlines()}, set(cgroups))


def check_left_nothing(before, tag, what):
    netns, links, cgroups = state()
    mine = sorted(n for n in netns if n.startswith(tag))
    assert not mine, f"{what}: namespaces left behind: {mine}"
    assert links == before[1], f"{what}: root namespace links changed: {sorted(links ^ before[1])}"
    assert not [c for c in cgroups if c.startswith(tag)], f"{what}: cgroups left behind: {sorted(cgroups)}"
    assert not os.path.exists(f"/run/tether-testbed/{tag}.pid"), f"{what}: marker /run/tether-testbed/{tag}.pid left"


def tag_of(output):
    for line in output.splitlines():
        if line.startswith("testbed: tag "):
            return line.split()[2].rstrip(";")
    raise AssertionError("the testbed did not print its tag:\n" + output)


def full_run(work, before):
    config_path = os.path.join(work, "config.json")
    with open(config_path, "w") as f:
        json.dump(CONFIG, f)
    s = spec(TETHER_PROGRAMS)
    s["vars"] = {"config": config_path}
    spec_path = os.path.join(work, "spec.json")
    with open(spec_path, "w") as f:
        json.dump(s, f)
    out = os.path.join(work, "out")
    t = time.monotonic()
    done = subprocess.run([sys.executable, TESTBED, "run", spec_path, "--out", out, "--test", "--tolerance", "0.10",
                           "--tether", TETHER], capture_output=True, text=True, timeout=100)
    print(done.stdout, done.stderr, f"({time.monotonic() - t:.1f} s)", sep="\n")
    if done.returncode == SKIP:
        sys.exit(SKIP)
    tag = tag_of(done.stdout)
    check_left_nothing(before, tag, "after a run")
    assert done.returncode == 0, f"testbed run exited {done.returncode}"
    result = json.load(open(os.path.join(out, "cells", "cell", "result.json")))
    assert result["status"] == "ok", result
    checks = result["selfcheck"]
    assert len(checks) == 6, f"expected 3 hosts x 2 directions measured, got {checks}"
    for c in checks:
        assert c["set_mbit"] == RATE and c["measured_mbit"], c
        assert abs(c["measured_mbit"] / RATE - 1) <= 0.10, f"{c['host']} {c['direction']}: {c['measured_mbit']} Mbit/s, set {RATE}"
    summary = result["collected"]["run/summary.json"]
    assert summary.get("workers_finished") == 2 and not summary.get("run_failed"), summary
    # The exchanges crossed the namespaces' links (not a loopback): the center's link carried them.
    center = result["link_bytes"]["center"]
    assert center["received"] >= summary["bytes_to_center"] and center["sent"] >= summary["bytes_to_workers"], \
        (center, summary["bytes_to_center"], summary["bytes_to_workers"])
    # ... and at the set rate: the center's process lasted at least as long as its link needed
    # to carry what it sent (less 10% for tbf's bucket and the counters' GSO headers).
    least = max(center["sent"], center["received"]) * 8 / (RATE * 1e6)
    seconds = next(p["seconds"] for p in result["processes"] if p["name"] == "center")
    assert seconds >= 0.9 * least, f"the center ran {seconds} s; its link needs {least:.2f} s at {RATE} Mbit/s"
    print(f"center: {seconds:.2f} s; {max(center['sent'], center['received']) / 1e6:.1f} MB need {least:.2f} s at {RATE} Mbit/s")


def run_tether_cell(work, before, name, config, spec_keys, what):
    """Writes `config` and a spec of TETHER_PROGRAMS with `spec_keys` laid over it, runs its one
    cell without the self-check, checks the testbed left nothing behind; returns (the testbed's
    exit code, result.json, the cell's logs directory)."""
    config_path = os.path.join(work, name + ".json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    s = spec(TETHER_PROGRAMS)
    s["vars"] = {"config": config_path}
    s.update(spec_keys)
    spec_path = os.path.join(work, name + "-spec.json")
    with open(spec_path, "w") as f:
        json.dump(s, f)
    out = os.path.join(work, name)
    done = subprocess.run([sys.executable, TESTBED, "run", spec_path, "--out", out, "--no-check", "--tether", TETHER],
                          capture_output=True, text=True, timeout=150)
    print(done.stdout, done.stderr, sep="\n")
    check_left_nothing(before, tag_of(done.stdout), what)
    cell = os.path.join(out, "cells", "cell")
    return done.returncode, json.load(open(os.path.join(cell, "result.json"))), os.path.join(cell, "logs")


def outage_run(work, before):
    """The center's link cut for 12 s in the middle of a run (every frame dropped in the bridge,
    longer than cluster.worker_timeout_ms, 10 s): the workers wait for the center and the center
    for them, they take their places back when the link returns, and the run ends complete."""
    config = json.loads(json.dumps(CONFIG))
    config["training"]["epochs"] = 3
    code, result, log_dir = run_tether_cell(work, before, "outage", config,
                                            {"outages": [{"host": "center", "at_s": 3, "for_s": 12}]}, "after the outage")
    logs = {name: open(os.path.join(log_dir, name + ".log")).read()
            for name in ("center", "worker0", "worker1") if os.path.exists(os.path.join(log_dir, name + ".log"))}
    assert code == 0 and result["status"] == "ok", (result.get("status"), {k: v[-1500:] for k, v in logs.items()})
    outage = result["outages"][0]
    assert outage["dropped_frames"] > 0 and 11.5 <= outage["restored_at_s"] - outage["cut_at_s"] <= 13, outage
    summary = result["collected"]["run/summary.json"]
    # Nothing lost: both workers finished and every planned sample was trained once.
    assert not summary.get("run_failed") and summary.get("workers_finished") == 2, summary
    assert summary.get("trained_share") == 1.0, summary
    # The outage was long enough to be one: the run outlasted it.
    seconds = next(p["seconds"] for p in result["processes"] if p["name"] == "center")
    assert seconds > outage["restored_at_s"], (seconds, outage)
    print(f"outage: {outage}; the run took {seconds:.1f} s; trained_share {summary['trained_share']}")


def churn_run(work, before):
    """A churn schedule at small size: worker w1's host killed (SIGKILL) 3 s in and started again
    2 s later with the same command (`tether worker`), then w0's, drawn by `churn`'s seed; the
    workers take their places back and the run ends complete."""
    config = json.loads(json.dumps(CONFIG))
    config["training"]["epochs"] = 3
    config["cluster"].update(worker_timeout_ms=3000, heartbeat_ms=500)
    code, result, log_dir = run_tether_cell(
        work, before, "churn", config,
        {"kills": [{"host": "w1", "at_s": 3, "back_s": 2}], "churn": {"hosts": ["w0"], "every_s": 7, "back_s": 2, "seed": 1}},
        "after the churn")
    logs = {f: open(os.path.join(log_dir, f)).read()[-1500:] for f in sorted(os.listdir(log_dir))}
    assert code == 0 and result["status"] == "ok", (result.get("status"), logs)
    kills = result["kills"]
    assert [k["host"] for k in kills[:2]] == ["w1", "w0"], kills
    for k in kills:
        assert k["programs"] and 1.9 <= k["back_at_s"] - k["at_s"] <= 3, kills
    assert "worker1.restart1.log" in logs and "worker0.restart1.log" in logs, sorted(logs)
    killed = [p for p in result["processes"] if p.get("scheduled_kill")]
    assert len(killed) == len(kills) and all(p["exit"] != 0 for p in killed), result["processes"]
    summary = result["collected"]["run/summary.json"]
    assert not summary.get("run_failed") and summary.get("workers_finished") == 2, summary
    print(f"churn: {kills}; trained_share {summary.get('trained_share')}")


def stopped_run(work, before):
    """SIGTERM while the programs run: exit 130, and everything made is gone."""
    s = spec([{"name": "sleeper", "hosts": ["center", "w0", "w1"], "argv": ["sleep", "300"]}])
    s["link"] = {"rate_mbit": None}
    spec_path = os.path.join(work, "stop.json")
    with open(spec_path, "w") as f:
        json.dump(s, f)
    testbed = subprocess.Popen([sys.executable, TESTBED, "run", spec_path, "--out", os.path.join(work, "stop"),
                                "--no-check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = os.path.join(work, "stop", "cells", "cell", "logs")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len([f for f in os.listdir(log)] if os.path.isdir(log) else []) < 3:
        time.sleep(0.1)
    time.sleep(0.5)  # the three sleepers are started (their logs exist) and running
    testbed.send_signal(signal.SIGTERM)
    output, _ = testbed.communicate(timeout=30)
    print(output)
    tag = tag_of(output)
    check_left_nothing(before, tag, "after SIGTERM")
    assert testbed.returncode == 130, f"SIGTERM: exit {testbed.returncode}, expected 130"
    result = json.load(open(os.path.join(work, "stop", "cells", "cell", "result.json")))
    assert result["status"] == "stopped" and len(result["processes"]) == 3, result
    for p in result["processes"]:
        assert p["killed"] and p["exit"] is not None, p
        alive = os.path.exists(f"/proc/{p['pid']}") and open(f"/proc/{p['pid']}/cmdline").read().startswith("sleep")
        assert not alive, f"{p['name']} (PID {p['pid']}) still runs after SIGTERM"


def main():
    if os.geteuid() != 0:
        print("skip: the testbed needs root (network namespaces)")
        return SKIP
    if not shutil.which("ip") or not shutil.which("tc"):
        print("skip: ip or tc is not installed (iproute2)")
        return SKIP
    if not os.access(TETHER, os.X_OK):
        print(f"{TETHER}: not built")
        return 1
    before = state()
    with tempfile.TemporaryDirectory(prefix="testbed-test-") as work:
        full_run(work, before)
        outage_run(work, before)
        churn_run(work, before)
        stopped_run(work, before)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
