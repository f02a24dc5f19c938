"""Hosts as network namespaces, joined by a bridge that lives in a namespace of its own.

    tag-br : br0 (198.18.0.254/24, the self-check's unshaped probe end), ports p0 .. pN-1
    tag-h  : eth0 (198.18.0.k/24), the other end of one port's veth pair

Nothing is created in the root namespace: every veth pair is made inside the bridge's
namespace with its far end moved straight into the host's, so parallel runs (each with its
own tag) may use the same addresses and interface names. Deleting a namespace removes its
links, their qdiscs and its nftables tables with it; so teardown is `ip netns del` of every
namespace made, after the processes inside them are gone.
"""

import json
import os
import secrets
import signal
import subprocess
import time

PREFIX = "tbed"  # every namespace, cgroup and marker this program makes starts with it
SUBNET = "198.18.0"  # a /24 of RFC 2544's benchmarking range 198.18.0.0/15
PROBE_ADDRESS = SUBNET + ".254"
MARKERS = "/run/tether-testbed"  # TAG.pid: the process that owns a tag's namespaces


class TestbedError(RuntimeError):
    pass


def sh(argv, timeout=30, check=True, input=None):
    """Runs a command (no shell), raising TestbedError that names it and its stderr."""
    try:
        done = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{' '.join(argv)}: no answer within {timeout} s")
    except FileNotFoundError:
        raise TestbedError(f"{argv[0]}: not installed (scripts/install-deps.sh installs iproute2 and nftables)")
    if check and done.returncode != 0:
        raise TestbedError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def namespaces():
    out = sh(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def new_tag():
    """A tag no live or leftover run uses, with a marker naming this process as its owner."""
    os.makedirs(MARKERS, exist_ok=True)
    taken = {n.split("-")[0] for n in namespaces()}
    for _ in range(100):
        tag = PREFIX + secrets.token_hex(3)
        if tag in taken:
            continue
        try:
            with open(os.path.join(MARKERS, tag + ".pid"), "x") as f:
                f.write(str(os.getpid()))
            return tag
        except FileExistsError:
            continue
    raise TestbedError(f"no free tag under {MARKERS} after 100 draws")


def drop_marker(tag):
    try:
        os.remove(os.path.join(MARKERS, tag + ".pid"))
        os.rmdir(MARKERS)  # only when empty: another run's marker keeps it
    except OSError:
        pass


def owner_alive(tag):
    try:
        with open(os.path.join(MARKERS, tag + ".pid")) as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return False
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def kill_namespace_processes(ns, grace_s=3.0):
    """Kills what still runs inside one of our namespaces: nobody else enters them, so every
    process there was started by this program (or by a child of one it started)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [int(p) for p in sh(["ip", "netns", "pids", ns], check=False).stdout.split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and sh(["ip", "netns", "pids", ns], check=False).stdout.split():
            time.sleep(0.1)


class Host:
    def __init__(self, name, ns, address, port):
        self.name, self.ns, self.address, self.port = name, ns, address, port
        self.device = "eth0"


class Network:
    def __init__(self, tag, host_names):
        if not 1 <= len(host_names) <= 250:
            raise TestbedError(f"hosts: {len(host_names)} hosts; between 1 and 250 fit in {SUBNET}.0/24")
        self.tag = tag
        self.bridge_ns = f"{tag}-br"
        self.hosts = {name: Host(name, f"{tag}-{name}", f"{SUBNET}.{k + 1}", f"p{k}")
                      for k, name in enumerate(host_names)}
        self.made = []  # namespaces, in creation order

    def _add_namespace(self, ns):
        sh(["ip", "netns", "add", ns])
        self.made.append(ns)
        sh(["ip", "-n", ns, "link", "set", "lo", "up"])

    def build(self):
        b = self.bridge_ns
        self._add_namespace(b)
        sh(["ip", "-n", b, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", b, "addr", "add", PROBE_ADDRESS + "/24", "dev", "br0"])
        sh(["ip", "-n", b, "link", "set", "br0", "up"])
        for h in self.hosts.values():
            self._add_namespace(h.ns)
            sh(["ip", "-n", b, "link", "add", h.port, "type", "veth", "peer", "name", h.device, "netns", h.ns])
            sh(["ip", "-n", b, "link", "set", h.port, "master", "br0"])
            sh(["ip", "-n", b, "link", "set", h.port, "up"])
            sh(["ip", "-n", h.ns, "addr", "add", h.address + "/24", "dev", h.device])
            sh(["ip", "-n", h.ns, "link", "set", h.device, "up"])
        return self

    def counters(self):
        """{host: (bytes sent, bytes received)} on each host's eth0 so far, headers included
        (GSO packets counted once with one header, so a little below what tbf counts)."""
        out = {}
        for h in self.hosts.values():
            stats = json.loads(sh(["ip", "-n", h.ns, "-s", "-j", "link", "show", h.device]).stdout)[0]["stats64"]
            out[h.name] = (stats["tx"]["bytes"], stats["rx"]["bytes"])
        return out

    def teardown(self):
        """Removes every namespace made, the processes left in them first; returns the errors."""
        errors = []
        for ns in reversed(self.made):
            try:
                kill_namespace_processes(ns)
                sh(["ip", "netns", "del", ns])
            except TestbedError as e:
                errors.append(str(e))
        self.made = []
        return errors


def leftovers(force=False):
    """Namespaces of our prefix whose owning run is gone (all of them with force)."""
    return [ns for ns in namespaces() if ns.startswith(PREFIX) and (force or not owner_alive(ns.split("-")[0]))]
