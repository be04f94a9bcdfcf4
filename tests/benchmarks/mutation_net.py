"""Mutation testing of ``django_webfetch/net/`` (issue 28): does a wrong line fail a test?

Run (from the repository root, as root: the tests run inside the lab's network namespace)::

    PYTHONPATH=$PWD nice -n 15 .venv/bin/python -m tests.benchmarks.mutation_net \\
        [--files ipclass,guard,hosts,urlparse] [--jobs 2] [--sample N] [--fresh] [--lab]

Each target module is parsed with ``ast``; every mutant is one operator applied at one
place (see ``OPERATORS`` below and docs/testing.rst).  A mutant is run in a forked child of
this process: the child serves the mutated source for the module through an import hook
(``sys.meta_path``), so the file on disk is never written, and runs pytest on the module's
own test file, then, if every test still passes, on every non-lab test of ``tests/net/``
(``-m "not lab"``), and with ``--lab`` on the lab tests of ``tests/net/`` too.  ``-x -q
-p no:randomly``, hypothesis derandomized and without its example database, a per-mutant
timeout (3x the unmutated run + 10 s; a timeout counts as killed, reported apart).

The parent imports the heavy third-party packages once and enters the lab namespace once
(single-threaded, before any fork), so a child starts in about half a second.  Subprocesses
that a test starts import the real, unmutated module: such tests cannot kill a mutant (the
score is, if anything, an underestimate).

Results are cached by mutant (hash of the mutated source and of the tests it ran against)
in ``.mutation_cache/net.json``: a rerun only runs new mutants and the survivors whose tests
changed.  Output: ``tests/benchmarks/mutation_net_results.json`` and a text table on stdout.
Survivors listed in ``tests/benchmarks/mutation_equivalent.txt`` (``module:line:col:operator
-- reason``) are counted as equivalent.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import hashlib
import importlib.abc
import importlib.util
import json
import os
import random
import re
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "django_webfetch.net"
#: Target modules and the test file(s) that cover each most directly (the first stage).
TARGETS: dict[str, tuple[str, ...]] = {
    "ipclass": ("tests/net/test_ipclass.py",),
    "guard": ("tests/net/test_guard.py",),
    "hosts": ("tests/net/test_hosts.py",),
    "urlparse": ("tests/net/test_urlparse.py",),
}
#: The second stage: every test of tests/net/ that needs no lab.
UNIT_STAGE = ("tests/net", "-m", "not lab")
#: The optional third stage (``--lab``): the lab tests of tests/net/ (not the lab's self-tests).
LAB_STAGE = ("tests/net", "-m", "lab", "--deselect", "tests/net/test_lab.py")
CACHE = ROOT / ".mutation_cache" / "net.json"
RESULTS = ROOT / "tests" / "benchmarks" / "mutation_net_results.json"
EQUIVALENT = ROOT / "tests" / "benchmarks" / "mutation_equivalent.txt"

# -- mutants ------------------------------------------------------------------------------

#: Text for people, not for machines (STYLE.md §3: "messages are for people; codes are for
#: machines"): string constants in these places are not mutated.  Calls whose positional
#: string arguments are messages, and the index from which a positional argument is one.
_MESSAGE_CALLS: dict[str, int] = {
    "PolicyError": 0,
    "ValueError": 0,
    "TypeError": 0,
    "_entry_error": 1,
    "_fail": 1,
    "ok": 1,
    "skip": 1,
}

_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.RShift: ast.LShift,
    ast.LShift: ast.RShift,
    ast.FloorDiv: ast.Mult,
    ast.Mult: ast.FloorDiv,
}

OPERATORS = (
    "compare: < <=, > >=, == !=, in / not in, is / is not (each swapped with its partner)",
    "boolean: and <-> or; not x -> x",
    "arithmetic: + <-> -, & <-> |, >> <-> <<, // <-> * (also in augmented assignments)",
    "integer constant n -> n+1, n-1, 0",
    'string constant -> "" (not docstrings, f-string text, messages, annotations)',
    "True <-> False",
    "return x -> return None",
    "raise ... -> pass",
    "if cond: -> if True: / if False:",
    "call statement -> pass",
)


@dataclass
class Mutant:
    module: str
    line: int
    end_line: int
    col: int
    operator: str
    before: str
    after: str
    source: str

    @property
    def key(self) -> str:
        """Stable, readable name: module:line:col:operator."""
        return f"{self.module}:{self.line}:{self.col}:{self.operator}"

    @property
    def digest(self) -> str:
        return hashlib.sha256(f"{self.module}\0{self.source}".encode()).hexdigest()[:16]


def _segment(node: ast.AST) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every node we mutate
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= 70 else text[:67] + "..."


def _excluded_nodes(tree: ast.Module) -> set[int]:
    """ids of nodes never mutated: docstrings, annotations, __all__, TYPE_CHECKING blocks,
    f-string text and human-readable messages."""
    skip: set[int] = set()

    def drop(node: ast.AST | None) -> None:
        if node is not None:
            for sub in ast.walk(node):
                skip.add(id(sub))

    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            drop(body[0])
        if isinstance(node, ast.arg):
            drop(node.annotation)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            drop(node.returns)
        if isinstance(node, ast.AnnAssign):
            drop(node.annotation)
            if isinstance(node.target, ast.Name) and node.target.id == "__all__":
                drop(node)
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in {"__all__", "__slots__"} for t in node.targets
        ):
            drop(node)
        if isinstance(node, ast.If) and _segment(node.test) == "TYPE_CHECKING":
            drop(node)
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.Constant):
                    skip.add(id(part))
        if isinstance(node, ast.keyword) and node.arg == "detail":
            drop(node.value)
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            first = _MESSAGE_CALLS.get(name)
            if first is not None:
                for arg in node.args[first:]:
                    drop(arg)
    return skip


def _variants(node: ast.AST) -> Iterator[tuple[str, ast.AST | None]]:
    """(operator name, replacement node) pairs for ``node``; the replacement is a new node
    put in the parent's field instead of ``node`` (None: remove the statement)."""
    if isinstance(node, ast.Compare):
        for index, op in enumerate(node.ops):
            swap = _COMPARE_SWAPS.get(type(op))
            if swap is not None:
                new = copy.copy(node)
                new.ops = [*node.ops[:index], swap(), *node.ops[index + 1 :]]
                yield f"compare:{type(op).__name__}->{swap.__name__}", new
    elif isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        boolop = copy.copy(node)
        boolop.op = other
        yield f"boolop:{type(node.op).__name__}->{type(other).__name__}", boolop
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield "not:drop", node.operand
    elif isinstance(node, ast.BinOp | ast.AugAssign):
        swap_op = _BINOP_SWAPS.get(type(node.op))
        if swap_op is not None:
            binop = copy.copy(node)
            binop.op = swap_op()
            yield f"binop:{type(node.op).__name__}->{swap_op.__name__}", binop
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            yield f"const:{value}->{not value}", ast.Constant(not value)
        elif isinstance(value, int):
            for label, new_value in (("+1", value + 1), ("-1", value - 1), ("0", 0)):
                if new_value != value:
                    yield f"const:int{label}", ast.Constant(new_value)
        elif isinstance(value, str) and value:
            yield "const:str->empty", ast.Constant("")
    elif isinstance(node, ast.Return):
        if node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None
        ):
            yield "return:None", ast.Return(value=ast.Constant(None))
    elif isinstance(node, ast.Raise):
        yield "raise:pass", ast.Pass()
    elif isinstance(node, ast.If):
        for value in (True, False):
            branch = copy.copy(node)
            branch.test = ast.Constant(value)
            yield f"if:{value}", branch
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        yield "call:pass", ast.Pass()


def _replace(parent: ast.AST, old: ast.AST, new: ast.AST) -> tuple[str, Any, int | None]:
    for field, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, field, new)
            return field, value, None
        if isinstance(value, list):
            for index, item in enumerate(value):
                if item is old:
                    value[index] = new
                    return field, value, index
    raise LookupError("child not found")  # pragma: no cover


def generate(module: str) -> list[Mutant]:
    """Every mutant of ``django_webfetch/net/<module>.py``, in source order."""
    path = ROOT / "django_webfetch" / "net" / f"{module}.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    baseline = ast.unparse(tree)
    skip = _excluded_nodes(tree)
    parents: dict[int, ast.AST] = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            parents[id(child)] = parent
    mutants: list[Mutant] = []
    seen: set[str] = {baseline}
    for node in list(ast.walk(tree)):
        if id(node) in skip or id(node) not in parents:
            continue
        parent = parents[id(node)]
        before = _segment(node)
        for operator, new in _variants(node):
            if new is not None and hasattr(node, "lineno"):
                ast.copy_location(new, node)
            field, holder, index = _replace(parent, node, new)  # type: ignore[arg-type]
            try:
                source = ast.unparse(ast.fix_missing_locations(tree))
            finally:
                if index is None:
                    setattr(parent, field, holder)
                else:
                    holder[index] = node
            if source in seen:
                continue  # a no-op (e.g. n+1 and n-1 both 0 in a second spelling)
            seen.add(source)
            mutants.append(
                Mutant(
                    module=module,
                    line=getattr(node, "lineno", 0),
                    end_line=int(getattr(node, "end_lineno", 0) or getattr(node, "lineno", 0)),
                    col=getattr(node, "col_offset", 0),
                    operator=operator,
                    before=before,
                    after=_segment(new) if new is not None else "",
                    source=source,
                )
            )
    mutants.sort(key=lambda m: (m.line, m.col, m.operator))
    return mutants


# -- running ------------------------------------------------------------------------------


class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serve ``source`` for module ``name`` (compiled with the real file name)."""

    def __init__(self, name: str, path: str, source: str) -> None:
        self.name, self.path, self.source = name, path, source

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(fullname, self.path, loader=self)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        exec(compile(self.source, self.path, "exec"), module.__dict__)


#: pytest plugins the net tests do not use (tests/net needs no Django: it is the pure layer).
_DISABLED_PLUGINS = ("django", "randomly", "schemathesis", "xdist", "xdist.looponfail")


def _write_ini(directory: str) -> str:
    """A pytest configuration like pyproject's, without the Django plugin (whose
    ``django.setup()`` would import the whole app in every child)."""
    import tomllib

    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    markers = options["ini_options"]["markers"]
    path = os.path.join(directory, "pytest.ini")
    with open(path, "w") as fh:
        fh.write("[pytest]\naddopts = --strict-markers -p no:cacheprovider")
        fh.write("".join(f" -p no:{name}" for name in _DISABLED_PLUGINS))
        fh.write("\nfilterwarnings = error\nmarkers =\n")
        fh.write("".join(f"    {marker}\n" for marker in markers))
    return path


def _preload() -> None:
    """Import the heavy third-party packages once in the parent (never django_webfetch)."""
    from importlib.metadata import entry_points

    plugins = [e.value for e in entry_points(group="pytest11") if e.name not in _DISABLED_PLUGINS]
    for name in (
        "pytest",
        "_pytest.python",
        "_pytest.assertion.rewrite",
        *plugins,
        "hypothesis",
        "hypothesis.strategies",
        "httpx",
        "httpcore",
        "h11",
        "ssl",
        "asyncio",
        "dns.resolver",
        "dns.message",
        "dns.query",
        "dnslib",
        "trustme",
        "regex",
        "re2",
        "publicsuffixlist",
        "tests.lab.plugin",
    ):
        with contextlib.suppress(Exception):
            __import__(name)
    leaked = [m for m in sys.modules if m.startswith("django_webfetch")]
    if leaked:
        raise SystemExit(f"the parent imported {leaked[:3]}: a mutant would not be loaded")


def _child(mutant_source: str | None, module: str, args: list[str], log: str, ini: str) -> None:
    """In the forked child: run pytest against the mutant; never returns."""
    code = 70
    try:
        os.setsid()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        from tests.lab import netns

        netns._owns_lab_dir = False  # the parent created the lab directory: keep it
        if mutant_source is not None:
            name = f"{PACKAGE}.{module}"
            path = str(ROOT / "django_webfetch" / "net" / f"{module}.py")
            sys.meta_path.insert(0, _MutantFinder(name, path, mutant_source))
        import hypothesis
        import pytest

        hypothesis.settings.register_profile(
            "mutation", database=None, derandomize=True, deadline=None, print_blob=False
        )
        code = int(
            pytest.main(
                [
                    "-c",
                    ini,
                    f"--rootdir={ROOT}",
                    "-x",
                    "-q",
                    "-p",
                    "no:randomly",
                    "-rfE",
                    "--hypothesis-profile=mutation",
                    # Plugins preloaded by the parent cannot be assertion-rewritten.
                    "-W",
                    "ignore::pytest.PytestAssertRewriteWarning",
                    *args,
                ]
            )
        )
    except BaseException:  # noqa: B036 - anything that escapes is an error of the run
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _coverage_child(args: list[str], datafile: str, log: str, ini: str) -> None:
    """In a forked child: run the tests unmutated under coverage with one context per test
    function (which tests execute which line of net/); never returns."""
    code = 70
    try:
        os.setsid()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        import coverage
        import pytest

        from tests.lab import netns

        netns._owns_lab_dir = False
        rc = os.path.join(os.path.dirname(datafile), "coveragerc")
        with open(rc, "w") as fh:
            fh.write("[run]\ndynamic_context = test_function\n")
        cov = coverage.Coverage(
            data_file=datafile,
            config_file=rc,
            include=[str(ROOT / "django_webfetch" / "net" / "*.py")],
        )
        cov.start()
        try:
            code = int(
                pytest.main(
                    ["-c", ini, f"--rootdir={ROOT}", "-q", "-p", "no:randomly", *args]
                    + ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
                )
            )
        finally:
            cov.stop()
            cov.save()
    except BaseException:  # noqa: B036
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _node_id(context: str) -> str | None:
    """``tests.net.test_x.test_y`` (coverage's test_function context) -> a pytest node id."""
    parts = context.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (ROOT / path).is_file():
            return path + "::" + "::".join(parts[cut:])
    return None


def coverage_map(runner: Runner, stages: dict[str, list[str]], modules: list[str]) -> Any:
    """{module: {line: [node ids]}} for every stage, from one run under coverage per stage
    (cached by the fingerprint of the tests and of the sources)."""
    from coverage import CoverageData

    sources = hashlib.sha256()
    for m in sorted(TARGETS):
        sources.update((ROOT / "django_webfetch" / "net" / f"{m}.py").read_bytes())
    key = _fingerprint([p for args in stages.values() for p in args if "/" in p], runner=False)
    key += sources.hexdigest()[:16] + "-".join(sorted(stages))
    path = CACHE.parent / f"coverage-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"
    if path.exists():
        return json.loads(path.read_text())
    result: dict[str, Any] = {m: {} for m in TARGETS}
    started = time.monotonic()
    for name, args in stages.items():
        datafile = os.path.join(runner.workdir, f"coverage-{name}")
        log = os.path.join(runner.workdir, f"coverage-{name}.log")
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _coverage_child(args, datafile, log, runner.ini)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            print(Path(log).read_text(errors="replace")[-3000:])
            raise SystemExit(f"the {name} tests fail under coverage, no mutation run")
        print(f"coverage of the {name} stage: {time.monotonic() - t0:.0f} s", flush=True)
        data = CoverageData(datafile)
        data.read()
        for filename in data.measured_files():
            module = Path(filename).stem
            if module not in result:
                continue
            for line, contexts in (data.contexts_by_lineno(filename) or {}).items():
                ids = result[module].setdefault(str(line), [])
                for context in contexts:
                    node = _node_id(context) if context else ""
                    if node is not None and node not in ids:
                        ids.append(node)
    # Without coverage the run takes less: its time bounds the per-mutant timeouts.
    result["seconds"] = time.monotonic() - started
    CACHE.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(result))
    return result


@dataclass
class Job:
    mutant: Mutant | None
    module: str
    stages: list[tuple[str, list[str]]]
    timeout: dict[str, float]
    pid: int = 0
    started: float = 0.0
    stage: int = 0
    log: str = ""
    elapsed: float = 0.0


def _failed_test(log: str) -> str:
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0][:160]
    match = re.search(r"^E\s+.*$", text, re.M)
    return match.group(0)[:160] if match else ""


class Runner:
    def __init__(self, jobs: int, workdir: str) -> None:
        self.jobs = jobs
        self.workdir = workdir
        self.ini = _write_ini(workdir)
        self.running: dict[int, Job] = {}
        self.counter = 0

    def _start(self, job: Job) -> None:
        name, args = job.stages[job.stage]
        self.counter += 1
        job.log = os.path.join(self.workdir, f"{self.counter}.log")
        job.started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(job.mutant.source if job.mutant else None, job.module, args, job.log, self.ini)
        job.pid = pid
        self.running[pid] = job

    def run(self, queue: list[Job], done: Any) -> None:
        """Run every job; ``done(job, status, stage_name, detail)`` for each finished one."""
        pending = list(queue)
        while pending or self.running:
            while pending and len(self.running) < self.jobs:
                self._start(pending.pop(0))
            time.sleep(0.02)
            now = time.monotonic()
            for pid, job in list(self.running.items()):
                name = job.stages[job.stage][0]
                waited, status = os.waitpid(pid, os.WNOHANG)
                if waited == 0:
                    if now - job.started > job.timeout[name]:
                        with contextlib.suppress(ProcessLookupError):
                            os.killpg(pid, signal.SIGKILL)
                        os.waitpid(pid, 0)
                        del self.running[pid]
                        job.elapsed += now - job.started
                        done(job, "timeout", name, "")
                    continue
                del self.running[pid]
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)  # stray subprocesses of the tests
                job.elapsed += now - job.started
                code = os.waitstatus_to_exitcode(status)
                if code == 0:
                    if job.stage + 1 < len(job.stages):
                        job.stage += 1
                        pending.insert(0, job)
                    else:
                        done(job, "survived", name, "")
                elif code in (1, 2, 3):
                    done(job, "killed", name, _failed_test(job.log))
                elif (
                    code == 70
                    and job.mutant is not None
                    and f"django_webfetch/net/{job.module}.py"
                    in Path(job.log).read_text(errors="replace")
                ):
                    # An exception raised in the mutated module while pytest started (the
                    # unmutated run started fine): the mutant breaks the package's import.
                    done(job, "killed", name, "exception at import")
                else:
                    tail = Path(job.log).read_text(errors="replace")[-1500:]
                    done(job, "error", name, f"exit {code}: {_failed_test(job.log)}\n{tail}")
                if os.path.exists(job.log):
                    os.unlink(job.log)


def _fingerprint(paths: list[str], runner: bool = True) -> str:
    """Hash of the test files a stage runs (and of this runner), for the cache."""
    digest = hashlib.sha256(Path(__file__).read_bytes() if runner else b"")
    files: list[Path] = []
    for p in paths:
        path = ROOT / p
        if path.is_dir():
            files.extend(sorted(path.rglob("*.py")))
        elif path.exists():
            files.append(path)
    files.extend(sorted((ROOT / "tests" / "lab").rglob("*.py")))
    for f in files:
        digest.update(str(f.relative_to(ROOT)).encode())
        digest.update(f.read_bytes())
    return digest.hexdigest()[:16]


def _load_equivalent() -> dict[str, str]:
    out: dict[str, str] = {}
    if EQUIVALENT.exists():
        for line in EQUIVALENT.read_text().splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, reason = line.partition(" -- ")
            out[key.strip()] = reason.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.mutation_net")
    parser.add_argument("--files", default=",".join(TARGETS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sample", type=int, default=0, help="at most N mutants per file")
    parser.add_argument("--fresh", action="store_true", help="ignore the cache")
    parser.add_argument("--lab", action="store_true", help="also run the lab tests of tests/net")
    parser.add_argument("--list", action="store_true", help="only list the mutants")
    parser.add_argument(
        "--skip-equivalent",
        action="store_true",
        help="do not run again a listed equivalent mutant that survived a cached run",
    )
    parser.add_argument("--only", default="", help="only mutants whose key contains this")
    parser.add_argument("--output", default=str(RESULTS))
    options = parser.parse_args(argv)
    os.chdir(ROOT)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    with contextlib.suppress(OSError):
        os.nice(max(0, 15 - os.nice(0)))
    modules = [m.strip() for m in options.files.split(",") if m.strip()]
    for m in modules:
        if m not in TARGETS:
            parser.error(f"unknown module {m!r}; one of {sorted(TARGETS)}")
    all_mutants: dict[str, list[Mutant]] = {}
    for m in modules:
        mutants = generate(m)
        if options.only:
            mutants = [x for x in mutants if options.only in x.key]
        if options.sample and len(mutants) > options.sample:
            picked = random.Random(28).sample(mutants, options.sample)
            mutants = sorted(picked, key=lambda x: x.line)
        all_mutants[m] = mutants
    if options.list:
        for mutants in all_mutants.values():
            for x in mutants:
                print(f"{x.key}  {x.before!r} -> {x.after!r}")
        print({m: len(v) for m, v in all_mutants.items()})
        return 0

    _preload()
    from tests.lab import netns

    netns.enter()
    workdir = tempfile.mkdtemp(prefix="webfetch-mutation-")
    runner = Runner(options.jobs, workdir)
    cache: dict[str, Any] = {}
    if CACHE.exists() and not options.fresh:
        cache = json.loads(CACHE.read_text())

    wide: dict[str, list[str]] = {"unit": list(UNIT_STAGE)}
    if options.lab:
        wide["lab"] = list(LAB_STAGE)

    # The unmutated baseline: every stage must pass, and its time sets the timeouts.
    baseline: dict[str, float] = {}
    failures: list[str] = []

    def base_done(job: Job, status: str, stage: str, detail: str) -> None:
        if status != "survived":
            failures.append(f"{job.module}/{stage}: {status} {detail}")

    for m in modules:
        t0 = time.monotonic()
        runner.run([Job(None, m, [("own", list(TARGETS[m]))], {"own": 900.0})], base_done)
        baseline[f"own:{m}"] = time.monotonic() - t0
    if failures:
        print("the unmutated tests fail, no mutation run:", *failures, sep="\n  ")
        return 1
    covered = coverage_map(runner, wide, modules)
    baseline["coverage"] = covered["seconds"]

    def stages_for(x: Mutant) -> list[tuple[str, list[str]]]:
        """The module's own test file, then the other tests that execute the mutated lines
        (by coverage); a line run only at import (no test context) gets every wide stage."""
        own = TARGETS[x.module]
        ids: list[str] = []
        import_time = False
        for line in range(x.line, x.end_line + 1):
            for node in covered[x.module].get(str(line), []):
                if node == "":
                    import_time = True
                elif node.split("::")[0] not in own and node not in ids:
                    ids.append(node)
        stages: list[tuple[str, list[str]]] = [("own", list(own))]
        if ids:
            stages.append(("covering", ids))
        elif import_time:
            stages.extend(wide.items())
        return stages

    slowest = max(v for k, v in baseline.items())
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in modules}
    # With --lab the survivors ran against fewer tests: rerun them.
    fingerprint = _fingerprint(["tests/net"]) + ("+lab" if options.lab else "")
    fingerprints = dict.fromkeys(modules, fingerprint)
    queue: list[Job] = []
    equivalent = _load_equivalent()
    for m in modules:
        timeouts = {"own": 3 * baseline[f"own:{m}"] + 10, "covering": 3 * slowest + 10}
        timeouts.update(dict.fromkeys(wide, 3 * slowest + 10))
        for x in all_mutants[m]:
            cached = cache.get(x.digest)
            if cached and (
                cached["status"] == "killed" or cached.get("fingerprint") == fingerprints[m]
            ):
                results[m].append({**cached, "cached": True})
                continue
            if (
                options.skip_equivalent
                and cached
                and cached["status"] == "survived"
                and x.key in equivalent
            ):
                results[m].append({**cached, "cached": True})
                continue
            queue.append(Job(x, m, stages_for(x), timeouts))
    total = len(queue)
    started = time.monotonic()
    finished = 0

    def done(job: Job, status: str, stage: str, detail: str) -> None:
        nonlocal finished
        finished += 1
        assert job.mutant is not None
        x = job.mutant
        record = {
            "key": x.key,
            "module": x.module,
            "line": x.line,
            "operator": x.operator,
            "before": x.before,
            "after": x.after,
            "status": status,
            "stage": stage,
            "by": detail,
            "seconds": round(job.elapsed, 2),
            "digest": x.digest,
            "fingerprint": fingerprints[x.module],
        }
        results[x.module].append(record)
        cache[x.digest] = record
        if finished % 5 == 0 or finished == total:
            rate = (time.monotonic() - started) / finished
            print(
                f"  {finished}/{total} mutants, {rate:.2f} s each, "
                f"~{rate * (total - finished) / 60:.1f} min left",
                flush=True,
            )
            CACHE.parent.mkdir(exist_ok=True)
            CACHE.write_text(json.dumps(cache))

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # the cache is written below

    signal.signal(signal.SIGTERM, stop)
    print(f"{total} mutants to run ({sum(map(len, all_mutants.values())) - total} cached)")
    print("baseline seconds:", {k: round(v, 1) for k, v in baseline.items()}, flush=True)
    try:
        runner.run(queue, done)
    finally:
        CACHE.parent.mkdir(exist_ok=True)
        CACHE.write_text(json.dumps(cache))
    wall = time.monotonic() - started

    summary: dict[str, dict[str, int]] = {}
    survivors: list[dict[str, Any]] = []
    for m in modules:
        counts = {"total": 0, "killed": 0, "timeout": 0, "survived": 0, "equivalent": 0}
        counts["error"] = 0
        for r in sorted(results[m], key=lambda r: (r["line"], r["key"])):
            counts["total"] += 1
            if r["status"] == "survived" and r["key"] in equivalent:
                r["equivalent"] = equivalent[r["key"]]
                counts["equivalent"] += 1
            else:
                counts[r["status"]] += 1
                if r["status"] == "survived":
                    survivors.append(r)
        summary[m] = counts
    output = {
        "operators": OPERATORS,
        "stages": {"own": {m: TARGETS[m] for m in modules}, "wide": wide},
        "baseline_seconds": {k: round(v, 2) for k, v in baseline.items()},
        "wall_seconds": round(wall, 1),
        "mutants_run": total,
        "summary": summary,
        "survivors": [{k: r[k] for k in ("key", "before", "after", "stage")} for r in survivors],
        "mutants": {m: sorted(results[m], key=lambda r: (r["line"], r["key"])) for m in modules},
    }
    if options.output:
        Path(options.output).write_text(json.dumps(output, indent=1, sort_keys=True) + "\n")
    print(table(summary))
    print(f"{total} mutants run in {wall / 60:.1f} min with {options.jobs} jobs")
    for r in survivors:
        print(f"SURVIVED {r['key']}  {r['before']!r} -> {r['after']!r}")
    stale = sorted(set(equivalent) - {r["key"] for m in modules for r in results[m]})
    if stale and not options.only and not options.sample:
        print("equivalent entries matching no mutant (stale):", *stale, sep="\n  ")
    import shutil

    shutil.rmtree(workdir, ignore_errors=True)
    lab_dir = os.environ.get("WEBFETCH_LAB_DIR", "")
    if lab_dir and os.path.basename(lab_dir).startswith("webfetch-lab-") and netns.owns_lab_dir():
        shutil.rmtree(lab_dir, ignore_errors=True)
    return 0


def table(summary: dict[str, dict[str, int]]) -> str:
    head = f"{'module':<10} {'total':>6} {'killed':>7} {'timeout':>8} {'equiv':>6} {'survived':>9}"
    head += f" {'error':>6} {'score':>7}"
    lines = [head, "-" * len(head)]
    for m, c in summary.items():
        relevant = c["total"] - c["equivalent"]
        score = (c["killed"] + c["timeout"]) / relevant if relevant else 1.0
        lines.append(
            f"{m:<10} {c['total']:>6} {c['killed']:>7} {c['timeout']:>8} {c['equivalent']:>6}"
            f" {c['survived']:>9} {c['error']:>6} {score:>7.1%}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
