"""What a host's link and CPU are like: rate (tbf), delay (netem, where the kernel has it),
loss (nftables), CPU quota (cgroup). Each is set on things the testbed made, never on the
root namespace's links."""

import os

from hosts import TestbedError, sh


def tbf_sizes(rate_mbit):
    """(burst, limit) in bytes for a tbf at rate_mbit.

    burst, the bucket: whatever it holds crosses at line rate, so short transfers look
    faster than the set rate (a tether exchange of the MLP is ~0.9 MB). It must hold a few
    full frames, and enough of the rate to cover a late dequeue: tbf refills on a timer run in
    softirq context, which a loaded machine serves late, and the link idles for as long as
    the bucket cannot cover the lateness. Measured at 100 Mbit/s, 4 hosts' links at once,
    load average ~6 on this 2-core machine: a 16 KiB bucket (1.3 ms) read 88.8-99.6 Mbit/s in
    one of two runs; 32 and 64 KiB (2.6 and 5.2 ms) read 99.1-100 in two runs each. So
    3 ms of the rate, at least 16 KiB: 16 KiB at 10 Mbit/s (13 ms of line time, 1.7% of one
    exchange), 37.5 KB at 100 Mbit/s (3 ms: an exchange on an idle link ends 3 ms early,
    4% of its 75 ms), 375 KB at 1 Gbit/s.

    limit, the queue behind the bucket: over veth the sending host's TCP hands tbf GSO
    packets of up to 64 KiB at once, which tbf cuts into frames and queues; a queue shorter
    than a few of them drops their tails. Measured at 10 Mbit/s with a 2.5 MB stream: a 100 KB
    queue dropped 1204 frames and TCP's recovery then delivered held-back data in bursts, so
    the stream read +3.5% above the rate (+2.6..+4.5% in 3 runs); 4 x 64 KiB dropped none and
    read 9.97-10.00 Mbit/s. So 4 x 64 KiB, or 50 ms of the rate where that is more. It adds
    up to ~0.2 s of queueing at 10 Mbit/s when full, as a real link's buffer would.
    """
    rate_bytes = rate_mbit * 1e6 / 8
    burst = max(16 * 1024, int(rate_bytes * 0.003))
    limit = max(4 * 65536, int(rate_bytes * 0.050)) + burst
    return burst, limit


def netem_available(ns):
    """Whether the kernel has sch_netem: tried on a namespace's loopback, then removed."""
    probe = sh(["tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"], check=False)
    if probe.returncode != 0:
        return False
    sh(["tc", "-n", ns, "qdisc", "del", "dev", "lo", "root"], check=False)
    return True


def shape(ns, device, rate_mbit, delay_ms=0.0):
    """Limits one direction of a link: the egress of `device` in `ns`. Without a rate and a
    delay the device keeps its default qdisc (unshaped)."""
    tc = ["tc", "-n", ns, "qdisc", "add", "dev", device]
    parent = ["root"]
    if delay_ms:
        # netem first, the rate limiter under it (netem's documented layout).
        sh(tc + ["root", "handle", "1:", "netem", "delay", f"{delay_ms}ms", "limit", "100000"])
        parent = ["parent", "1:1"]
    if rate_mbit:
        burst, limit = tbf_sizes(rate_mbit)
        sh(tc + parent + ["handle", "10:", "tbf", "rate", f"{rate_mbit}mbit", "burst", str(burst), "limit", str(limit)])


def loss_rules(links):
    """nftables ruleset for the bridge's namespace dropping a fraction of the IPv4 frames that
    cross each lossy host's port, both ways. links: {port: percent}. Drops happen in the
    bridge, between the hosts, so neither end's stack sees them as local errors (a drop in
    a host's own output hook would be an EPERM to the sender instead of a lost packet).
    Every rule counts what it saw and what it dropped, so the run reports the loss it got."""
    lines = ["table bridge tbed_loss {"]
    for hook in ("forward", "input", "output"):
        lines.append(f"  chain {hook} {{ type filter hook {hook} priority 0; policy accept;")
        for port, percent in sorted(links.items()):
            per_million = int(round(percent * 1e4))
            for side in (["iifname"] if hook == "input" else ["oifname"] if hook == "output" else ["iifname", "oifname"]):
                lines.append(f'    {side} "{port}" meta protocol ip counter')
                lines.append(f'    {side} "{port}" meta protocol ip numgen random mod 1000000 < {per_million} counter drop')
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def cut_table(port):
    return f"tbed_cut_{port}"


def cut(bridge_ns, port):
    """An outage: every IPv4 frame crossing the host's port is dropped, both ways, counted, in
    the bridge, so neither end sees an error: a pulled cable or a dead path, not a link set
    down (which the host's stack would report at once)."""
    table = cut_table(port)
    rules = [f"table bridge {table} {{"]
    for hook in ("forward", "input", "output"):
        rules.append(f"  chain {hook} {{ type filter hook {hook} priority -10; policy accept;")
        for side in (["iifname"] if hook == "input" else ["oifname"] if hook == "output" else ["iifname", "oifname"]):
            rules.append(f'    {side} "{port}" meta protocol ip counter drop')
        rules.append("  }")
    rules.append("}")
    sh(["ip", "netns", "exec", bridge_ns, "nft", "-f", "-"], input="\n".join(rules) + "\n")


def restore(bridge_ns, port):
    """Ends an outage; returns the frames it dropped."""
    table = cut_table(port)
    out = sh(["ip", "netns", "exec", bridge_ns, "nft", "list", "table", "bridge", table], check=False).stdout
    dropped = sum(int(line.split()[line.split().index("packets") + 1]) for line in out.splitlines() if "packets" in line)
    sh(["ip", "netns", "exec", bridge_ns, "nft", "delete", "table", "bridge", table])
    return dropped


def add_loss(bridge_ns, links):
    if links:
        sh(["ip", "netns", "exec", bridge_ns, "nft", "-f", "-"], input=loss_rules(links))


def measured_loss(bridge_ns):
    """{port: (frames seen, frames dropped)} from the loss rules' counters."""
    out = sh(["ip", "netns", "exec", bridge_ns, "nft", "list", "table", "bridge", "tbed_loss"], check=False).stdout
    seen = {}
    for line in out.splitlines():
        words = line.split()
        if "counter" not in words or len(words) < 2:
            continue
        port = words[1].strip('"')
        packets = int(words[words.index("packets") + 1])
        total, dropped = seen.get(port, (0, 0))
        seen[port] = (total, dropped + packets) if "drop" in words else (total + packets, dropped)
    return seen


class CpuQuota:
    """A cgroup holding the processes started on one host, limited to `cores` CPUs
    (cpu.max under cgroup v2, cpu.cfs_quota_us under v1's cpu controller)."""

    PERIOD_US = 100000

    def __init__(self, name, cores):
        if not 0 < cores <= os.cpu_count():
            raise TestbedError(f"cpu_quota: {cores} cores; give a fraction between 0 and {os.cpu_count()} (this machine's CPUs)")
        v2 = "/sys/fs/cgroup/cgroup.controllers"
        quota = int(cores * self.PERIOD_US)
        if os.path.exists(v2):
            if "cpu" not in open("/sys/fs/cgroup/cgroup.subtree_control").read().split():
                raise TestbedError("cgroup v2 without the cpu controller enabled at the root "
                                   "(/sys/fs/cgroup/cgroup.subtree_control): enable it to use cpu_quota")
            self.path = os.path.join("/sys/fs/cgroup", name)
            os.mkdir(self.path)
            self._write("cpu.max", f"{quota} {self.PERIOD_US}")
        elif os.path.exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
            self.path = os.path.join("/sys/fs/cgroup/cpu", name)
            os.mkdir(self.path)
            self._write("cpu.cfs_period_us", str(self.PERIOD_US))
            self._write("cpu.cfs_quota_us", str(quota))
        else:
            raise TestbedError("cpu_quota: neither cgroup v2's cpu.max nor v1's cpu.cfs_quota_us is available")

    def _write(self, key, value):
        with open(os.path.join(self.path, key), "w") as f:
            f.write(value)

    def join(self):
        """Moves the calling process in: run in a child between fork and exec."""
        self._write("cgroup.procs", str(os.getpid()))

    def remove(self):
        if os.path.isdir(self.path):
            os.rmdir(self.path)  # fails while a process is in it: teardown kills them first


def leftover_cgroups(prefix):
    found = []
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/cpu"):
        if os.path.isdir(root):
            found += [os.path.join(root, d) for d in os.listdir(root) if d.startswith(prefix)]
    return found
