"""experiments/README.md's index against the files it names: every row has a result, a command,
what it writes and how long it takes; every path in it exists (a sweep reproduce.sh runs: its
file or script; a benchmark binary: an executable experiments/meson.build builds); every
script, spec and sweep file under experiments/ is named in the table or in the list of modules
that are not entry points; every section a row or a document cites exists; and no document,
script or test names a path under experiments/ that is not there. Renaming a file without the
index fails here. Standard library only; TETHER_SOURCE_DIR is the repository."""
import glob
import itertools
import os
import re
from pathlib import Path

from harness import case, main

SOURCE = Path(os.environ.get("TETHER_SOURCE_DIR", Path(__file__).resolve().parents[2]))
INDEX = SOURCE / "experiments" / "README.md"
ENTRY_SUFFIXES = {".py", ".sh", ".json", ".cpp", ".hpp"}  # scripts, specs, sweeps, benchmarks
# Repository paths a row may name; anything else (runs/, sweeps/, build/tether, ~/venvs) is
# output or an install, made by running.
PATH = re.compile(r"(?<![\w./~-])((?:experiments|configs|docs|examples|scripts|tests)/[\w./*{},-]*[\w*}/])")
BINARY = re.compile(r"build/experiments/([\w-]+)")
LINK = re.compile(r"\]\(([^)\s]*)\)")
# Where a document may name experiments/ paths: prose, scripts, tests and code comments.
REFERRERS = ["README.md", "docs/**/*.md", "experiments/**/*", "tests/**/*.py", "tests/**/*.cpp", "tests/meson.build",
             "scripts/*", "examples/**/*.py", "src/**/*", "include/**/*", "cuda/**/*", "meson.build"]


def expand(token):
    """A path with {a,b} alternatives as the paths it stands for."""
    parts = re.split(r"\{([^{}]*)\}", token)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def exists(path):
    return bool(glob.glob(str(SOURCE / path))) if "*" in path else (SOURCE / path).exists()


def rows():
    """The index table's rows, each a list of its four cells."""
    found, in_table = [], False
    for line in INDEX.read_text().splitlines():
        if line.startswith("| result | command |"):
            in_table = True
            continue
        if in_table and line.startswith("|---"):
            continue
        if in_table and line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            found.append(cells)
        elif in_table:
            break
    return found


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown):
    seen, out = {}, set()
    for line in markdown.read_text().splitlines():
        m = re.match(r"#+ (.*)", line)
        if m:
            base = slug(m.group(1))
            out.add(base if base not in seen else f"{base}-{seen[base]}")
            seen[base] = seen.get(base, 0) + 1
        out.update(re.findall(r'<a id="([^"]+)"', line))
    return out


def check_link(origin, target, problems):
    path, _, anchor = target.partition("#")
    if re.match(r"[a-z]+:", path):
        return
    file = (origin.parent / path).resolve() if path else origin
    if not file.exists():
        problems.append(f"{origin.relative_to(SOURCE)}: link to {target}: no such file")
    elif anchor and file.suffix == ".md" and anchor not in anchors(file):
        problems.append(f"{origin.relative_to(SOURCE)}: link to {target}: no such section in {file.name}")


@case
def every_row_says_what_it_reproduces_how_and_how_long():
    table = rows()
    assert len(table) >= 30, f"{INDEX}: {len(table)} rows; the index has one per result"
    for cells in table:
        assert len(cells) == 4 and all(cells), f"a row needs a result, a command, its output and a time: {cells}"
        assert LINK.search(cells[0]), f"the result names no section (a link): {cells[0]}"
        assert "`" in cells[1], f"no command: {cells}"


def built():
    """The benchmarks experiments/meson.build builds."""
    return set(re.findall(r"executable\('([\w-]+)'", (SOURCE / "experiments" / "meson.build").read_text()))


@case
def every_path_the_index_names_exists():
    missing = []
    for cells in rows():
        text = " ".join(cells)
        for token in PATH.findall(text):
            missing += [p for p in expand(token.rstrip("/.")) if not exists(p)]
        missing += [f"build/experiments/{b} (not in experiments/meson.build)" for b in BINARY.findall(text)
                    if b not in built()]
        for names in re.findall(r"reproduce\.sh ([\w ]+)`", text):  # a sweep file or a scripted sweep
            missing += [f"reproduce.sh {n}" for n in names.split() if not any(
                (SOURCE / "experiments" / "sweeps" / (n + suffix)).is_file() for suffix in (".json", ".py"))]
    assert not missing, f"{INDEX} names what is not there: {sorted(set(missing))}"


@case
def every_section_the_index_cites_exists():
    problems = []
    for cells in rows():
        for target in LINK.findall(" ".join(cells)):
            check_link(INDEX, target, problems)
    assert not problems, problems


@case
def every_script_spec_and_sweep_is_in_the_index():
    text = INDEX.read_text()
    named = {p for token in PATH.findall(text) if "*" not in token for p in expand(token.rstrip("/."))}
    files = sorted(str(p.relative_to(SOURCE)) for p in (SOURCE / "experiments").rglob("*")
                   if p.is_file() and p.suffix in ENTRY_SUFFIXES and "__pycache__" not in p.parts)
    left_out = [f for f in files if f not in named]
    assert not left_out, f"{INDEX} does not name {left_out}: add a row, or list a helper under its table"
    assert len(files) > 60, files  # the walk found the tree


def referrers():
    for pattern in REFERRERS:
        for path in SOURCE.glob(pattern):
            if (path.is_file() and "__pycache__" not in path.parts and path.suffix not in {".png", ".csv"}
                    and path.resolve() != Path(__file__).resolve()):  # this file names paths to find them
                yield path


@case
def no_document_names_an_experiments_path_that_is_not_there():
    in_build_tree = {str(Path("experiments") / b) for b in built()}  # ninja's name for a benchmark
    missing = []
    for path in referrers():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for token in re.findall(r"(?<![\w./~-])(experiments/[\w./*{},-]*[\w*}])", text):
            missing += [f"{path.relative_to(SOURCE)}: {p}" for p in expand(token.rstrip("."))
                        if not exists(p) and p not in in_build_tree]
    assert not missing, missing


@case
def links_into_the_experiments_and_the_results_find_their_sections():
    problems = []
    for path in referrers():
        if path.suffix != ".md":
            continue
        for target in LINK.findall(path.read_text()):
            file = (path.parent / target.partition("#")[0]).resolve()
            inside = SOURCE / "experiments" in file.parents or file == SOURCE / "docs" / "results.md"
            if inside or path.is_relative_to(SOURCE / "experiments"):
                check_link(path, target, problems)
    assert not problems, problems


if __name__ == "__main__":
    raise SystemExit(main())
