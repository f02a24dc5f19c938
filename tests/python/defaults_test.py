#!/usr/bin/python3
"""Each default and each field exists once, in C++: the Python package keeps no copy of an
option's default (it reads tether's default_options()), the defaults its docstrings,
docs/python.md and docs/embedding.md state are those, and every field of a C++ struct Python sees as a dict is in
that dict. Run by meson test with PYTHONPATH=build/python and TETHER_SOURCE_DIR."""
import ast
import os
import re
import sys
from pathlib import Path

import numpy as np

import tether
from tether import _tether
from harness import case, main

SOURCE = Path(os.environ["TETHER_SOURCE_DIR"])


def numeric_defaults():
    return {name: value for name, value in _tether.default_options().items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)}


@case
def the_package_keeps_no_copy_of_an_options_default():
    # Its options, CenterService's strategy and workers (ServiceOptions' too), and from_env's
    # center_trains (cluster.center_trains).
    names = {*_tether.default_options(), "strategy", "workers", "center_trains"}
    copies = []
    for path in sorted((SOURCE / "python/tether").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            given = []  # (name, default) pairs: `def f(join_timeout_ms=60000)`, `.get("servers", 1)`
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                positional = node.args.posonlyargs + node.args.args
                given += zip([a.arg for a in positional[len(positional) - len(node.args.defaults):]], node.args.defaults)
                given += [(a.arg, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and len(node.args) == 2 and isinstance(node.args[0], ast.Constant)):
                given.append((node.args[0].value, node.args[1]))
            copies += [f"{path.name}:{node.lineno}: {name}={ast.unparse(default)}" for name, default in given
                       if name in names and isinstance(default, ast.Constant) and default.value is not None]
    assert not copies, f"defaults copied into Python (take them from _tether: default_options() and the like): {copies}"


@case
def the_defaults_the_docs_state_are_the_modules():
    defaults = numeric_defaults()
    # `worker_timeout_ms` (10,000), max_failed_share (option, 0.5), heartbeat_ms (2000, at most
    # ..., `heartbeat_ms` (2 s by default: a _ms option stated in seconds. (On one line: an error
    # message quoted in the docs may break before "(1000)", a value given, not a default.)
    stated = re.compile(rf"\b({'|'.join(defaults)})\b`*[ \t]*\((?:option, )?(-?[0-9][0-9,]*(?:\.[0-9]+)?)(\s*s\b)?")
    texts = {"CenterService": tether.CenterService.__doc__, "CenterService.wait": tether.CenterService.wait.__doc__,
             "docs/python.md": (SOURCE / "docs/python.md").read_text(),
             "docs/embedding.md": (SOURCE / "docs/embedding.md").read_text()}
    checked, wrong = 0, []
    for where, text in texts.items():
        for m in stated.finditer(text):
            checked += 1
            value = float(m.group(2).replace(",", "")) * (1000 if m.group(3) and m.group(1).endswith("_ms") else 1)
            if value != defaults[m.group(1)]:
                wrong.append(f"{where}: {m.group(0)}, but the default is {defaults[m.group(1)]}")
    assert not wrong, wrong
    assert checked >= 10, checked


@case
def every_field_of_a_cpp_struct_python_sees_as_a_dict_is_in_it():
    fields = _tether.struct_fields()
    for struct, (names, count) in fields.items():
        assert len(set(names)) == len(names) == count, f"{struct} has {count} fields in C++; Python names {names}"
    center = tether.CenterService(np.zeros(2, np.float32), strategy={"name": "adag", "communication_window": 1})
    x = np.zeros(2, np.float32)
    worker = center.connect_worker(x)
    x += 1
    worker.step(1)
    report = worker.finish()
    center.wait()
    assert sorted(report) == sorted(fields["WorkerReport"][0]) and "rejoins" in report, report
    old = os.environ.get("TETHER_SECRET")
    os.environ["TETHER_SECRET"] = "cd" * 32
    try:
        keys = tether.launcher_keys(0, "job")
    finally:
        if old is None:
            del os.environ["TETHER_SECRET"]
        else:
            os.environ["TETHER_SECRET"] = old
    assert sorted(keys) == sorted(fields["CurveKeys"][0]), keys
    own_arguments = {"strategy", "workers", "address"}  # CenterService's own, not **options
    assert set(_tether.default_options()) == set(fields["ServiceOptions"][0]) - own_arguments


if __name__ == "__main__":
    sys.exit(main())
