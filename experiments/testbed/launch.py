"""Processes inside hosts: started with `ip netns exec`, logged to files, bounded in time.

`ip netns exec` execs the command, so the PID Popen returns is the command's own. Each runs
in a session of its own (process group = its PID), so stopping one reaches its children and
nothing else; a group is signalled only while its leader is not yet reaped, so its PID
cannot have been reused. Anything that outlives that is found by namespace at teardown
(hosts.kill_namespace_processes).
"""

import os
import signal
import subprocess
import time


class Process:
    def __init__(self, name, popen, log_path):
        self.name, self.popen, self.log_path = name, popen, log_path
        self.started = time.monotonic()
        self.seconds = None
        self.killed = False

    @property
    def returncode(self):
        return self.popen.returncode


class Launcher:
    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.processes = []
        os.makedirs(log_dir, exist_ok=True)

    def start(self, name, ns, argv, env=None, quota=None, subdir=""):
        """Starts argv in namespace ns; stdout and stderr go to LOG_DIR/[SUBDIR/]NAME.log."""
        os.makedirs(os.path.join(self.log_dir, subdir), exist_ok=True)
        log_path = os.path.join(self.log_dir, subdir, name + ".log")
        log = open(log_path, "wb")
        full_env = dict(os.environ)
        full_env.update(env or {})
        popen = subprocess.Popen(["ip", "netns", "exec", ns] + [str(a) for a in argv], stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, env=full_env, start_new_session=True,
                                 preexec_fn=quota.join if quota else None)
        log.close()  # the child holds its own descriptor
        process = Process(name, popen, log_path)
        self.processes.append(process)
        return process

    def wait(self, processes, deadline):
        """Waits until every process in `processes` has exited or `deadline` (monotonic) passes;
        returns False on the deadline (the caller stops them)."""
        while True:
            running = [p for p in processes if p.popen.poll() is None]
            for p in processes:
                if p.seconds is None and p.popen.returncode is not None:
                    p.seconds = time.monotonic() - p.started
            if not running:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def first_failure(self, processes):
        for p in processes:
            if p.popen.poll() not in (None, 0):
                return p
        return None

    def stop(self, processes=None, grace_s=5.0, signals=(signal.SIGTERM, signal.SIGKILL)):
        """SIGTERM to every still-running process group of ours, SIGKILL after grace_s (or
        `signals` in turn, grace_s apart)."""
        targets = [p for p in (processes if processes is not None else self.processes) if p.popen.poll() is None]
        for sig in signals:
            for p in targets:
                if p.popen.poll() is None:
                    p.killed = True
                    try:
                        os.killpg(p.popen.pid, sig)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and any(p.popen.poll() is None for p in targets):
                time.sleep(0.05)
            targets = [p for p in targets if p.popen.poll() is None]
            if not targets:
                return
