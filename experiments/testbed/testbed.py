#!/usr/bin/python3
"""A shaped-link testbed on one machine: hosts in network namespaces, their links limited with
tc and nftables, processes started in them and bounded in time. Needs root.

    testbed.py run SPEC.json [--out DIR] [--only CELL]... [--tether PATH] [--tolerance F] [--test]
    testbed.py check [--hosts N] [--rate MBIT] [--tolerance F] [--test]
    testbed.py cleanup [--force]

Exit codes: 0 done; 1 a cell failed (or, with --test, a link measured beyond the tolerance);
2 usage, a bad spec, or not root; 77 with --test where namespaces or tc are unavailable;
130 interrupted (everything made is removed first). See README.md.
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import sys
import time

import hosts
import launch
import selfcheck
import shaping
import spec as specs
from hosts import TestbedError

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
# The experiments' module path (experiments/README.md, "Running") for every program started in
# a host, before what the testbed inherited: ddp_baseline.py imports examples/python's
# torchft_diloco. Not part of a cell's definition, so finished cells stay finished.
PROGRAM_PYTHONPATH = os.pathsep.join(
    [os.path.join(SOURCE, "experiments"), os.path.join(SOURCE, "examples", "python")]
    + [p for p in [os.environ.get("PYTHONPATH")] if p])
SKIP = 77


class Stopped(Exception):
    """SIGTERM or SIGINT: unwinds to the teardown like an error."""


class Unavailable(Exception):
    pass


def _stop(signum, frame):
    raise Stopped(signal.Signals(signum).name)


def preflight(tag):
    """Checks, in a throwaway namespace, what the testbed needs; returns whether netem exists."""
    ns = f"{tag}-preflight"
    try:
        hosts.sh(["ip", "netns", "add", ns])
    except TestbedError as e:
        raise Unavailable(f"network namespaces are unavailable here ({e})")
    try:
        hosts.sh(["ip", "-n", ns, "link", "add", "pfa", "type", "veth", "peer", "name", "pfb"])
        hosts.sh(["ip", "-n", ns, "link", "add", "br0", "type", "bridge"])
        hosts.sh(["tc", "-n", ns, "qdisc", "add", "dev", "pfa", "root", "tbf", "rate", "10mbit", "burst", "16k", "limit", "64k"])
        return shaping.netem_available(ns)
    except TestbedError as e:
        raise Unavailable(f"veth pairs, bridges or tc's tbf are unavailable here ({e})")
    finally:
        hosts.sh(["ip", "netns", "del", ns], check=False)


def shape_network(net, cell, netem):
    for h in net.hosts.values():
        link = cell.links[h.name]
        if link["delay_ms"] and not netem:
            raise TestbedError(f"cell {cell.name}: host {h.name}: delay_ms {link['delay_ms']:g} needs netem, and this "
                               "kernel has no sch_netem; drop the delay (rate and loss work without it)")
        # Both directions of the host's link: its own egress (upload) and the bridge port's
        # egress towards it (download); half the delay each way makes delay_ms the round trip.
        for ns, dev in ((h.ns, h.device), (net.bridge_ns, h.port)):
            shaping.shape(ns, dev, link["rate_mbit"], link["delay_ms"] / 2)


def peers_bin():
    """The peers' venv's bin (scripts/install-deps.sh --peers): its Python has PyTorch 2.x,
    torchft and tether; torchft_lighthouse is there too."""
    venv = os.environ.get("TETHER_PEERS_VENV") or os.path.expanduser("~/venvs/tether-peers")
    return os.path.join(venv, "bin")


def variables(cell, net, cell_dir, tether):
    v = {"tether": tether, "python": "/usr/bin/python3", "peers_python": os.path.join(peers_bin(), "python"),
         "peers_bin": peers_bin(), "source": SOURCE,
         "testbed": HERE, "cell": cell_dir, "probe_addr": hosts.PROBE_ADDRESS}
    v.update({f"addr_{h.name}": h.address for h in net.hosts.values()})
    for key, value in cell.vars.items():
        v[key] = specs.substitute(value, v, f"vars.{key}") if isinstance(value, str) else value
    return v


def start_program(launcher, cell, net, quotas, v, p, rank, restarts=0):
    """Starts rank `rank` of program p; `restarts` > 0: the kill schedule's restart of it, with
    the same command ({restarts} and TESTBED_RESTARTS say which) and its log of its own."""
    host_name = p["hosts"][rank]
    host = net.hosts[host_name]
    local = dict(v, host=host_name, rank=rank, world=len(p["hosts"]), addr=host.address, restarts=restarts)
    name = p["name"] if len(p["hosts"]) == 1 else f"{p['name']}{rank}"
    where = f"programs.{p['name']}"
    argv = [specs.substitute(a, local, where + ".argv") for a in p["argv"]]
    env = {"PYTHONPATH": PROGRAM_PYTHONPATH, "TESTBED_RESTARTS": str(restarts)}
    env.update({k: specs.substitute(e, local, where + ".env") for k, e in {**cell.env, **p.get("env", {})}.items()})
    process = launcher.start(name + (f".restart{restarts}" if restarts else ""), host.ns, argv, env, quotas.get(host_name))
    process.host, process.waited = host_name, p.get("wait", True)
    process.program, process.rank, process.restarts, process.scheduled_kill = p, rank, restarts, False
    return process


def start_programs(launcher, cell, net, quotas, v):
    return [start_program(launcher, cell, net, quotas, v, p, rank) for p in cell.programs for rank in range(len(p["hosts"]))]


def kill_host(launcher, processes, host):
    """SIGKILL to every running program on `host` (their process groups); returns them."""
    down = [p for p in processes if p.host == host and not p.scheduled_kill and p.popen.poll() is None]
    for p in down:
        p.scheduled_kill = True
    launcher.stop(down, grace_s=5.0, signals=(signal.SIGKILL,))
    return down


def collect(cell, cell_dir):
    found = {}
    for relative in cell.collect:
        path = os.path.join(cell_dir, relative)
        try:
            with open(path) as f:
                found[relative] = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            found[relative] = {"error": str(e)}
    return found


def run_cell(cell, cell_dir, tag, netem, options):
    if os.path.isdir(cell_dir):
        shutil.rmtree(cell_dir)  # a failed attempt's files must not be collected as this one's
    os.makedirs(cell_dir)
    net = hosts.Network(tag, cell.hosts)
    launcher = launch.Launcher(os.path.join(cell_dir, "logs"))
    quotas = {}
    result = {"cell": cell.describe(), "tag": tag, "netem": netem, "status": "error"}
    started_at = time.monotonic()
    processes = []
    try:
        net.build()
        shape_network(net, cell, netem)
        rates = {h: cell.links[h]["rate_mbit"] for h in cell.hosts}
        if not options.no_check:
            result["selfcheck"], bad, result["selfcheck_earlier"] = selfcheck.check(
                launcher, net, rates, options.tolerance, "selfcheck")
            if bad and options.test:
                result["status"] = "selfcheck_failed"
                return result
        shaping.add_loss(net.bridge_ns, {net.hosts[h].port: l["loss_percent"] for h, l in cell.links.items() if l["loss_percent"]})
        for h, cores in cell.cpu_quota.items():
            quotas[h] = shaping.CpuQuota(f"{tag}-{h}", float(cores))
        v = variables(cell, net, cell_dir, options.tether)
        before = net.counters()
        t0 = time.monotonic()
        processes += start_programs(launcher, cell, net, quotas, v)
        deadline = t0 + cell.timeout_s
        # Outages and kills as (time, what, index): a cut at at_s, restored for_s later; a kill
        # at at_s, its programs back back_s later; in time order.
        events = sorted([(t0 + o["at_s"], "cut", k) for k, o in enumerate(cell.outages)] +
                        [(t0 + o["at_s"] + o["for_s"], "restore", k) for k, o in enumerate(cell.outages)] +
                        [(t0 + o["at_s"], "kill", k) for k, o in enumerate(cell.kills)])
        outages = result["outages"] = [dict(o) for o in cell.outages]
        kills = result["kills"] = []
        down = {}  # kill index -> the processes it took down, until they are back
        # The run's lead: the first waited program's first rank (rank 0, or the center). Once it
        # has ended, the run is over: nothing is killed or started again after it.
        lead = next((p for p in processes if p.waited), None)
        # A process that fails ends the cell: the others (a center waiting for a dead worker)
        # would otherwise sit until the deadline. A killed one is replaced by its restart.
        while True:
            waited = [p for p in processes if p.waited and not p.scheduled_kill]
            if launcher.wait(waited, min(deadline, time.monotonic() + (0.1 if events else 0.5))) and not down:
                break
            while events and time.monotonic() >= events[0][0]:
                at, what, k = events.pop(0)
                if what in ("kill", "back") and lead is not None and lead.popen.poll() is not None:
                    down.pop(k, None)
                    continue
                if what == "kill":
                    o = cell.kills[k]
                    if any(p.host == o["host"] for taken, _ in down.values() for p in taken):
                        continue  # that host is down already: this kill is moot
                    taken = kill_host(launcher, processes, o["host"])
                    if not taken:
                        continue  # nothing runs there any more (its programs ended)
                    entry = {"host": o["host"], "at_s": round(time.monotonic() - t0, 3), "back_s": o["back_s"],
                             "programs": [p.name for p in taken]}
                    kills.append(entry)
                    print(f"[{cell.name}] {o['host']} killed at {time.monotonic() - t0:.1f} s "
                          f"({', '.join(p.name for p in taken)})", flush=True)
                    if o["back_s"] is not None:
                        down[k] = (taken, entry)
                        events.append((at + o["back_s"], "back", k))
                        events.sort()
                    continue
                if what == "back":
                    taken, entry = down.pop(k)
                    for p in taken:
                        processes.append(start_program(launcher, cell, net, quotas, v, p.program, p.rank, p.restarts + 1))
                    entry["back_at_s"] = round(time.monotonic() - t0, 3)
                    print(f"[{cell.name}] {cell.kills[k]['host']} started again at {time.monotonic() - t0:.1f} s", flush=True)
                    continue
                port = net.hosts[cell.outages[k]["host"]].port
                if what == "cut":
                    shaping.cut(net.bridge_ns, port)
                    outages[k]["cut_at_s"] = round(time.monotonic() - t0, 3)
                else:
                    outages[k]["dropped_frames"] = shaping.restore(net.bridge_ns, port)
                    outages[k]["restored_at_s"] = round(time.monotonic() - t0, 3)
                print(f"[{cell.name}] {cell.outages[k]['host']}'s link {'cut' if what == 'cut' else 'restored'} "
                      f"at {time.monotonic() - t0:.1f} s", flush=True)
            if time.monotonic() >= deadline or launcher.first_failure([p for p in processes if not p.scheduled_kill]):
                break
        waited = [p for p in processes if p.waited and not p.scheduled_kill]
        timed_out = any(p.popen.poll() is None for p in waited) and time.monotonic() >= deadline
        launcher.stop()
        result["seconds"] = round(time.monotonic() - t0, 3)
        after = net.counters()
        result["link_bytes"] = {h: {"sent": after[h][0] - before[h][0], "received": after[h][1] - before[h][1]}
                                for h in after}
        if any(l["loss_percent"] for l in cell.links.values()):
            result["loss_counted"] = shaping.measured_loss(net.bridge_ns)
        result["collected"] = collect(cell, cell_dir)
        ok = all(p.returncode == 0 for p in waited)
        result["status"] = "ok" if ok else "timed_out" if timed_out else "failed"
        return result
    except TestbedError as e:
        result["error"] = str(e)
        print(f"testbed: cell {cell.name}: {e}", file=sys.stderr, flush=True)
        return result
    except Stopped as e:
        result["status"], result["error"] = "stopped", f"stopped by {e}"
        raise
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        launcher.stop()
        result["processes"] = [{"name": p.name, "host": p.host, "pid": p.popen.pid, "exit": p.returncode, "killed": p.killed,
                                "seconds": round(p.seconds, 3) if p.seconds else None,
                                "started_s": round(p.started - processes[0].started, 3),
                                **({"scheduled_kill": True} if getattr(p, "scheduled_kill", False) else {})}
                               for p in processes]
        errors = net.teardown()
        for q in quotas.values():
            try:
                q.remove()
            except OSError as e:
                errors.append(f"{q.path}: {e}")
        if errors:
            print("testbed: teardown: " + "; ".join(errors), file=sys.stderr, flush=True)
        result["wall_seconds"] = round(time.monotonic() - started_at, 3)
        result["finished_at"] = datetime.datetime.now().isoformat(timespec="seconds")
        with open(os.path.join(cell_dir, "result.json"), "w") as f:
            json.dump(result, f, indent=2)
        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGTERM, _stop)


def command_run(options, tag, netem):
    name, cells = specs.load(options.spec)
    if options.only:
        unknown = set(options.only) - {c.name for c in cells}
        if unknown:
            raise TestbedError(f"--only {sorted(unknown)}: no such cell; the cells are {[c.name for c in cells]}")
        cells = [c for c in cells if c.name in options.only]
    out = os.path.abspath(options.out or os.path.join(SOURCE, "runs", "testbed", name))
    failed = 0
    for cell in cells:
        cell_dir = os.path.join(out, "cells", cell.name)
        try:
            with open(os.path.join(cell_dir, "result.json")) as f:
                before = json.load(f)
            # The same cell, finished: skipped. A cell whose definition changed since runs again.
            if before.get("status") == "ok" and before.get("cell") == json.loads(json.dumps(cell.describe())):
                print(f"[{cell.name}] done before: skipped ({cell_dir}/result.json)", flush=True)
                continue
            if before.get("status") == "ok":
                print(f"[{cell.name}] its definition changed since {cell_dir}/result.json: runs again", flush=True)
        except (OSError, json.JSONDecodeError):
            pass
        print(f"[{cell.name}] links {json.dumps(cell.links)}", flush=True)
        result = run_cell(cell, cell_dir, tag, netem, options)
        print(f"[{cell.name}] {result['status']} in {result.get('seconds', '-')} s; {cell_dir}", flush=True)
        failed += result["status"] != "ok"
    return 1 if failed else 0


def command_check(options, tag, netem):
    names = [f"h{k}" for k in range(options.hosts)]
    cell = specs.Cell("check", {"hosts": names, "programs": [], "link": {"rate_mbit": options.rate}})
    net = hosts.Network(tag, names)
    launcher = launch.Launcher(os.path.join(options.out or "/tmp", f"{tag}-check"))
    try:
        net.build()
        shape_network(net, cell, netem)
        results, bad, _ = selfcheck.check(launcher, net, {h: options.rate for h in names}, options.tolerance)
        if options.json:
            with open(options.json, "w") as f:
                json.dump(results, f, indent=2)
        return 1 if bad and options.test else 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        launcher.stop()
        net.teardown()
        if not options.out:
            shutil.rmtree(launcher.log_dir, ignore_errors=True)


def command_cleanup(options):
    left = hosts.leftovers(options.force)
    for ns in left:
        hosts.kill_namespace_processes(ns)
        hosts.sh(["ip", "netns", "del", ns], check=False)
    tags = {ns.split("-")[0] for ns in left}
    groups = [g for g in shaping.leftover_cgroups(hosts.PREFIX)
              if options.force or not hosts.owner_alive(os.path.basename(g).split("-")[0])]
    for g in groups:
        try:
            os.rmdir(g)
        except OSError as e:
            print(f"testbed: cleanup: {g}: {e}", file=sys.stderr)
    for tag in tags:
        hosts.drop_marker(tag)
    print(f"testbed: removed {len(left)} namespace(s) and {len(groups)} cgroup(s) of prefix {hosts.PREFIX}")
    return 0


def parse(argv):
    p = argparse.ArgumentParser(prog="testbed.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("run", "check"):
        s = sub.add_parser(name)
        s.add_argument("--tolerance", type=float, default=0.05, help="self-check: largest relative error allowed (0.05)")
        s.add_argument("--test", action="store_true", help="test mode: exit 77 where namespaces are unavailable, "
                       "and fail when a link measures beyond the tolerance")
        s.add_argument("--out", help="results directory (run: runs/testbed/NAME)")
    run = sub.choices["run"]
    run.add_argument("spec")
    run.add_argument("--only", action="append", help="run this cell only (repeatable)")
    run.add_argument("--tether", default=os.environ.get("TETHER_BIN", os.path.join(SOURCE, "build", "tether")))
    run.add_argument("--no-check", action="store_true", help="skip the self-check (not for reported figures)")
    check = sub.choices["check"]
    check.add_argument("--hosts", type=int, default=2)
    check.add_argument("--rate", type=float, default=None, help="Mbit/s per host link (default: unshaped)")
    check.add_argument("--json", help="also write the measurements here")
    clean = sub.add_parser("cleanup")
    clean.add_argument("--force", action="store_true", help="also what belongs to runs still alive")
    return p.parse_args(argv)


def main(argv):
    options = parse(argv)
    if os.geteuid() != 0:
        print("testbed: needs root (it creates network namespaces, qdiscs and cgroups); run it with sudo or as root",
              file=sys.stderr)
        return 2
    if options.command == "cleanup":
        return command_cleanup(options)
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    try:
        tag = hosts.new_tag()
    except TestbedError as e:  # no `ip`, or no /run to write the marker to
        print(f"testbed: {e}", file=sys.stderr)
        return SKIP if options.test else 1
    try:
        netem = preflight(tag)
        print(f"testbed: tag {tag}; netem {'available' if netem else 'absent (no delay; rate and loss only)'}",
              flush=True)
        return command_run(options, tag, netem) if options.command == "run" else command_check(options, tag, netem)
    except Unavailable as e:
        print(f"testbed: {e}", file=sys.stderr)
        return SKIP if options.test else 1
    except TestbedError as e:
        print(f"testbed: {e}", file=sys.stderr)
        return 2
    except Stopped as e:
        print(f"testbed: stopped by {e}; everything made was removed", file=sys.stderr)
        return 130
    finally:
        hosts.drop_marker(tag)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
