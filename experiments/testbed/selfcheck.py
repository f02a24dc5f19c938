"""The self-check: a timed TCP stream across every host's link, each direction, against the
bridge's own address (unshaped), so a figure is one link's and not the slower of two.

Upload (host -> bridge) crosses the host's eth0 egress; download (bridge -> host) the port's
egress in the bridge. The two directions are measured in separate rounds, because the ACKs
of a download would take ~3% of the same link's upload. Within a round the hosts run at once
while their rates add up to at most 1 Gbit/s (this 2-core machine moves that through
Python sockets and veths); beyond that, and for unshaped links, one host at a time.
"""

import json
import os
import sys
import time

from hosts import PROBE_ADDRESS

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rate_probe.py")
PYTHON = "/usr/bin/python3"
CONCURRENT_MBIT = 1000
UNSHAPED_BYTES = 256 << 20


def probe_bytes(rate_mbit):
    """About 2 s of the rate, at least 2 MB (a few tether exchanges) and at most 256 MB."""
    if not rate_mbit:
        return UNSHAPED_BYTES
    return int(min(UNSHAPED_BYTES, max(2e6, rate_mbit * 1e6 / 8 * 2.0)))


def _flow(launcher, bridge_ns, host, direction, rate_mbit, index, subdir):
    """Starts one stream's receiver, then its sender; returns both processes."""
    size = probe_bytes(rate_mbit)
    port = 7000 + index
    if direction == "up":
        recv_ns, send_ns, to = bridge_ns, host.ns, PROBE_ADDRESS
    else:
        recv_ns, send_ns, to = host.ns, bridge_ns, host.address
    name = f"selfcheck-{host.name}-{direction}"
    receiver = launcher.start(name + "-recv", recv_ns, [PYTHON, PROBE, "recv", port, size], subdir=subdir)
    sender = launcher.start(name + "-send", send_ns, [PYTHON, PROBE, "send", to, port, size], subdir=subdir)
    return receiver, sender


def _read(process):
    """The receiver's figures, or its error (the last line of its log where it wrote none)."""
    with open(process.log_path) as f:
        text = f.read()
    for line in reversed(text.splitlines()):
        if line.startswith("{") and ("frame_bps" in line or "error" in line):
            return json.loads(line)
    last = text.strip().splitlines()[-1:] or ["no output"]
    return {"error": f"{last[0]} (exit {process.returncode}; {process.log_path})"}


def measure(launcher, network, rates, subdir="", timeout_s=120):
    """rates: {host name: Mbit/s or None}. Returns [{host, direction, set_mbit, measured_mbit,
    error}] with the frame rate (headers included, as tbf counts)."""
    results = []
    for direction in ("up", "down"):
        hosts = list(network.hosts.values())
        together = all(rates[h.name] for h in hosts) and sum(rates[h.name] for h in hosts) <= CONCURRENT_MBIT
        groups = [hosts] if together else [[h] for h in hosts]
        for group in groups:
            flows = [(h, _flow(launcher, network.bridge_ns, h, direction, rates[h.name], k, subdir)) for k, h in enumerate(group)]
            processes = [p for _, pair in flows for p in pair]
            finished = launcher.wait(processes, time.monotonic() + timeout_s)
            if not finished:
                launcher.stop(processes)
            for h, (receiver, _) in flows:
                r = _read(receiver)
                measured = r.get("frame_bps")
                results.append({"host": h.name, "direction": direction, "set_mbit": rates[h.name],
                                "measured_mbit": round(measured / 1e6, 3) if measured else None,
                                "payload_mbit": round(r["payload_bps"] / 1e6, 3) if measured else None,
                                "seconds": r.get("seconds"), "error": r.get("error") if finished else "timed out"})
    return results


def verdict(results, tolerance):
    """Prints set vs measured for every link; returns the list of links out of tolerance."""
    bad = []
    print(f"self-check (frame rate over each stream's last 80%; tolerance {tolerance:.0%}):", flush=True)
    for r in results:
        set_text = f"{r['set_mbit']:g} Mbit/s" if r["set_mbit"] else "unshaped"
        if r["measured_mbit"] is None:
            print(f"  {r['host']:>6} {r['direction']:>4}: set {set_text:>14}, FAILED: {r['error']}", flush=True)
            bad.append(r)
            continue
        line = f"  {r['host']:>6} {r['direction']:>4}: set {set_text:>14}, measured {r['measured_mbit']:9.2f} Mbit/s"
        if r["set_mbit"]:
            error = r["measured_mbit"] / r["set_mbit"] - 1
            r["relative_error"] = round(error, 4)
            line += f" ({error:+.1%})"
            if abs(error) > tolerance:
                line += "  <-- OUT OF TOLERANCE"
                bad.append(r)
        print(line, flush=True)
    if bad:
        print(f"WARNING: {len(bad)} link measurement(s) beyond {tolerance:.0%} of the set rate: "
              "the shaping is not what the experiment says it is", file=sys.stderr, flush=True)
    return bad


def check(launcher, network, rates, tolerance, subdir="", attempts=3, pause_s=5.0):
    """Measures and judges every link, again after pause_s while some link is out of tolerance
    (at most `attempts` times). Returns (the last attempt's results, the links out of
    tolerance in it, every earlier attempt's results).

    Why again: for 5-10 s after a tether cell's namespaces are deleted, links here measured
    3-5% low (5 hosts at 100 Mbit/s: 95.0-96.5, then 99.6-100 five to ten seconds later; after
    a cell that only slept, 99.5-100 at once, at the same load average of ~10). A link that
    stays out of tolerance is still reported, loudly."""
    earlier = []
    for attempt in range(1, attempts + 1):
        results = measure(launcher, network, rates, f"{subdir}/{attempt}" if subdir else str(attempt))
        bad = verdict(results, tolerance)
        if not bad or attempt == attempts:
            return results, bad, earlier
        earlier.append(results)
        print(f"self-check: attempt {attempt} of {attempts} out of tolerance; measuring again in {pause_s:g} s",
              flush=True)
        time.sleep(pause_s)
