"""The spec file: hosts, their links, what runs where, and the cells of the experiment.

A cell is the spec's defaults with the cell's own keys laid over them (`link`, `host_links`
and `vars` merged key by key; `cpu_quota`, `timeout_s` replaced). `grid` multiplies the
cells (or one empty cell) by every combination of its axes; an axis is a dotted key, e.g.
"link.rate_mbit" or "vars.strategy". See README.md for every key.
"""

import copy
import itertools
import json
import random
import re

from hosts import TestbedError

LINK_KEYS = {"rate_mbit", "delay_ms", "loss_percent"}
TOP_KEYS = {"name", "hosts", "link", "host_links", "cpu_quota", "timeout_s", "vars", "env", "programs", "collect",
            "cells", "grid", "description", "outages", "kills", "churn"}
CELL_KEYS = {"name", "link", "host_links", "cpu_quota", "timeout_s", "vars", "outages", "kills", "churn"}
OUTAGE_KEYS = {"host", "at_s", "for_s"}
KILL_KEYS = {"host", "at_s", "back_s"}
CHURN_KEYS = {"hosts", "every_s", "back_s", "seed"}
PROGRAM_KEYS = {"name", "hosts", "argv", "env", "wait"}
NAME = re.compile(r"^[A-Za-z0-9._=+-]+$")


class Cell:
    def __init__(self, name, spec):
        self.name = name
        self.hosts = spec["hosts"]
        self.timeout_s = float(spec.get("timeout_s", 600))
        self.vars = spec.get("vars", {})
        self.env = spec.get("env", {})
        self.programs = spec["programs"]
        self.collect = spec.get("collect", [])
        self.cpu_quota = spec.get("cpu_quota", {})
        # [{host, at_s, for_s}]: the host's link drops everything from at_s to at_s + for_s
        # after the programs start (a cable pulled, not a link set down: no end sees an error).
        self.outages = spec.get("outages", [])
        # [{host, at_s, back_s}]: every program on the host gets SIGKILL at at_s and, unless
        # back_s is null, is started again back_s later with the same command ({restarts} in it,
        # and TESTBED_RESTARTS in its environment, count its restarts). `churn` {hosts, every_s,
        # back_s, seed} adds one such kill every every_s seconds, of a host drawn from `hosts`
        # (random.Random(seed)), until the cell's timeout.
        self.kills = list(spec.get("kills", []))
        self.churn = spec.get("churn")
        if self.churn:
            seed = self.churn["seed"]  # a number, or "{seed}": the cell's vars.seed (a grid's axis)
            draw = random.Random(int(substitute(seed, self.vars, "churn.seed")) if isinstance(seed, str) else seed)
            at = self.churn["every_s"]
            while at < self.timeout_s:
                self.kills.append({"host": draw.choice(self.churn["hosts"]), "at_s": at, "back_s": self.churn["back_s"]})
                at += self.churn["every_s"]
        self.kills.sort(key=lambda k: k["at_s"])
        self.links = {}
        for h in self.hosts:
            link = dict(spec.get("link", {}))
            link.update(spec.get("host_links", {}).get(h, {}))
            self.links[h] = {"rate_mbit": link.get("rate_mbit"), "delay_ms": float(link.get("delay_ms") or 0),
                             "loss_percent": float(link.get("loss_percent") or 0)}

    def describe(self):
        described = {"name": self.name, "hosts": self.hosts, "links": self.links, "cpu_quota": self.cpu_quota,
                     "vars": self.vars, "env": self.env, "programs": self.programs, "timeout_s": self.timeout_s}
        if self.outages:  # only where there are some: cells of specs without them stay as they were
            described["outages"] = self.outages
        if self.churn:
            described["churn"] = self.churn
        if self.kills:
            described["kills"] = self.kills
        return described


def _fail(path, key, message):
    raise TestbedError(f"{path}: {key}: {message}")


def _check_link(path, where, link):
    if not isinstance(link, dict):
        _fail(path, where, f"{json.dumps(link)} is not an object of {sorted(LINK_KEYS)}")
    for k, v in link.items():
        if k not in LINK_KEYS:
            _fail(path, f"{where}.{k}", f"unknown key; expected one of {sorted(LINK_KEYS)}")
        if v is not None and (not isinstance(v, (int, float)) or v < 0 or (k == "loss_percent" and v > 100)):
            _fail(path, f"{where}.{k}", f"{json.dumps(v)}; expected a number >= 0 (null: unshaped), loss at most 100")


def _check_outages(path, where, outages, hosts):
    if not isinstance(outages, list):
        _fail(path, where, f"{json.dumps(outages)}; expected a list of {{host, at_s, for_s}}")
    for k, o in enumerate(outages):
        if not isinstance(o, dict) or set(o) != OUTAGE_KEYS:
            _fail(path, f"{where}[{k}]", f"{json.dumps(o)}; expected exactly the keys {sorted(OUTAGE_KEYS)}")
        if o["host"] not in hosts:
            _fail(path, f"{where}[{k}].host", f"{json.dumps(o['host'])}: no such host; hosts are {hosts}")
        for key in ("at_s", "for_s"):
            if not isinstance(o[key], (int, float)) or o[key] < 0 or (key == "for_s" and o[key] == 0):
                _fail(path, f"{where}[{k}].{key}", f"{json.dumps(o[key])}; expected seconds, at_s >= 0 and for_s > 0")


def _check_kills(path, where, kills, churn, hosts):
    if not isinstance(kills, list):
        _fail(path, where + ".kills", f"{json.dumps(kills)}; expected a list of {{host, at_s, back_s}}")
    for k, o in enumerate(kills):
        if not isinstance(o, dict) or set(o) != KILL_KEYS:
            _fail(path, f"{where}.kills[{k}]", f"{json.dumps(o)}; expected exactly the keys {sorted(KILL_KEYS)}")
        if o["host"] not in hosts:
            _fail(path, f"{where}.kills[{k}].host", f"{json.dumps(o['host'])}: no such host; hosts are {hosts}")
        if not isinstance(o["at_s"], (int, float)) or o["at_s"] < 0:
            _fail(path, f"{where}.kills[{k}].at_s", f"{json.dumps(o['at_s'])}; expected seconds >= 0")
        if o["back_s"] is not None and (not isinstance(o["back_s"], (int, float)) or o["back_s"] < 0):
            _fail(path, f"{where}.kills[{k}].back_s", f"{json.dumps(o['back_s'])}; expected seconds >= 0, or null: not restarted")
    if churn is None:
        return
    if not isinstance(churn, dict) or set(churn) != CHURN_KEYS:
        _fail(path, where + ".churn", f"{json.dumps(churn)}; expected exactly the keys {sorted(CHURN_KEYS)}")
    if not isinstance(churn["hosts"], list) or not churn["hosts"] or any(h not in hosts for h in churn["hosts"]):
        _fail(path, where + ".churn.hosts", f"{json.dumps(churn['hosts'])}; expected a non-empty list of hosts of {hosts}")
    for key in ("every_s", "back_s"):
        if not isinstance(churn[key], (int, float)) or churn[key] <= 0:
            _fail(path, f"{where}.churn.{key}", f"{json.dumps(churn[key])}; expected seconds > 0")
    if churn["back_s"] >= churn["every_s"]:
        _fail(path, where + ".churn.back_s", f"{churn['back_s']}; expected less than every_s ({churn['every_s']}): "
              "one host down at a time")
    if not isinstance(churn["seed"], int) and churn["seed"] != "{seed}":
        _fail(path, where + ".churn.seed", f"{json.dumps(churn['seed'])}; expected an integer, or \"{{seed}}\" (vars.seed)")


def _overlay(base, cell):
    merged = copy.deepcopy(base)
    for key in ("link", "vars"):
        merged[key] = {**base.get(key, {}), **cell.get(key, {})}
    host_links = copy.deepcopy(base.get("host_links", {}))
    for h, link in cell.get("host_links", {}).items():
        host_links[h] = {**host_links.get(h, {}), **link}
    merged["host_links"] = host_links
    for key in ("cpu_quota", "timeout_s", "outages", "kills"):
        if key in cell:
            merged[key] = cell[key]
    # churn merges key by key too (a grid's "churn.seed"); a cell's "churn": null has none.
    if "churn" in cell and cell["churn"] is None:
        merged.pop("churn", None)
    elif "churn" in base or "churn" in cell:
        merged["churn"] = {**base.get("churn", {}), **cell.get("churn", {})}
    return merged


def _set_dotted(cell, dotted, value):
    section, _, key = dotted.partition(".")
    if section not in ("link", "vars", "churn") or not key:
        raise TestbedError(f"grid: axis {dotted!r}; expected \"link.KEY\", \"vars.KEY\" or \"churn.KEY\"")
    cell.setdefault(section, {})[key] = value


def _validate(path, spec):
    for k in spec:
        if k not in TOP_KEYS:
            _fail(path, k, f"unknown key; expected one of {sorted(TOP_KEYS)}")
    hosts = spec.get("hosts")
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) and NAME.match(h) for h in hosts):
        _fail(path, "hosts", f"{json.dumps(hosts)}; expected a list of host names ([A-Za-z0-9._-])")
    if len(set(hosts)) != len(hosts):
        _fail(path, "hosts", "a name appears twice")
    _check_link(path, "link", spec.get("link", {}))
    for h, link in spec.get("host_links", {}).items():
        if h not in hosts:
            _fail(path, f"host_links.{h}", f"no such host; hosts are {hosts}")
        _check_link(path, f"host_links.{h}", link)
    programs = spec.get("programs")
    if not isinstance(programs, list) or not programs:
        _fail(path, "programs", "expected a non-empty list of {name, hosts, argv}")
    for k, p in enumerate(programs):
        for key in p:
            if key not in PROGRAM_KEYS:
                _fail(path, f"programs[{k}].{key}", f"unknown key; expected one of {sorted(PROGRAM_KEYS)}")
        if not NAME.match(str(p.get("name", ""))):
            _fail(path, f"programs[{k}].name", f"{json.dumps(p.get('name'))}; expected a name ([A-Za-z0-9._-])")
        if not isinstance(p.get("argv"), list) or not p["argv"]:
            _fail(path, f"programs[{k}].argv", "expected a non-empty list of strings")
        for h in p.get("hosts", []):
            if h not in hosts:
                _fail(path, f"programs[{k}].hosts", f"{h!r} is not one of hosts {hosts}")
        if not p.get("hosts"):
            _fail(path, f"programs[{k}].hosts", "expected a non-empty list of hosts")


def load(path):
    """Reads and checks a spec; returns (name, [Cell])."""
    try:
        with open(path) as f:
            spec = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise TestbedError(f"{path}: {e}")
    _validate(path, spec)
    cells = spec.get("cells", [{}])
    for k, c in enumerate(cells):
        for key in c:
            if key not in CELL_KEYS:
                _fail(path, f"cells[{k}].{key}", f"unknown key; expected one of {sorted(CELL_KEYS)}")
    grid = spec.get("grid", {})
    axes = list(grid.items())
    expanded = []
    for c in cells:
        for values in itertools.product(*[v for _, v in axes]):
            cell = copy.deepcopy(c)
            parts = [cell["name"]] if "name" in cell else []
            for (axis, _), value in zip(axes, values):
                _set_dotted(cell, axis, value)
                parts.append(f"{axis.split('.')[-1]}={'unshaped' if value is None else value}")
            cell["name"] = ",".join(parts) or "cell"
            expanded.append(cell)
    seen = set()
    out = []
    for c in expanded:
        if not NAME.match(c["name"].replace(",", "+")) or c["name"] in seen:
            _fail(path, "cells", f"cell name {c['name']!r} is not unique or has characters outside [A-Za-z0-9._=+,-]")
        seen.add(c["name"])
        merged = _overlay(spec, c)
        _check_link(path, f"cells[{c['name']}].link", merged["link"])
        for h, link in merged["host_links"].items():
            if h not in spec["hosts"]:
                _fail(path, f"cells[{c['name']}].host_links.{h}", f"no such host; hosts are {spec['hosts']}")
        for h in merged.get("cpu_quota", {}):
            if h not in spec["hosts"]:
                _fail(path, f"cpu_quota.{h}", f"no such host; hosts are {spec['hosts']}")
        _check_outages(path, f"cells[{c['name']}].outages", merged.get("outages", []), spec["hosts"])
        _check_kills(path, f"cells[{c['name']}]", merged.get("kills", []), merged.get("churn"), spec["hosts"])
        out.append(Cell(c["name"], merged))
    return spec.get("name", "testbed"), out


def substitute(value, variables, where):
    """Fills {name} in one argument; an unknown name is an error naming it and what exists."""
    try:
        return str(value).format_map(variables)
    except KeyError as e:
        raise TestbedError(f"{where}: {value!r} names {{{e.args[0]}}}, which is not one of {sorted(variables)}")
    except (ValueError, IndexError) as e:
        raise TestbedError(f"{where}: {value!r}: {e}")
