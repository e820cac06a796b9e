"""Two rules of docs/discussion/closing.md and cancellation.md, read from the source.

* A cancel scope kept where another task can reach it is one of the units of work
  the closing page lists (`ActiveTurn`, `Forward`, `Lifeline`) or the platform's
  shutdown shield; any other is private to its owner.
* No wait of the runtime takes its duration from a literal: `trio.sleep`,
  `move_on_after`, `fail_after` and a `CancelScope(deadline=...)` read a policy
  (the benchmark harness paces itself, and says so).
* Every HTTP client band-trio builds shares the process's TLS context
  (`band_trio.tls`): an `httpx2.AsyncClient(...)` without `verify=` loads a CA
  bundle of its own (docs/benchmarks.md, "One bridge, many identities").
* No package imports another package's private (`_x`) module: it uses the
  package's exports or a named internal module (`observe.hooks`, `contract.groups`);
  a top-level private module (`band_trio._ranges`) is band-trio's own, for all.
* Every whole HTTP answer above the server seam is `band_trio.server.answer`'s.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).parents[2] / "src" / "band_trio"
PUBLISHED_SCOPES = {
    ("runtime/_turn_state.py", "ActiveTurn"),
    ("host/_turns.py", "Lifeline"),
    ("platform/_server.py", "_Server"),
}
"""(module, class) whose instances carry a public `scope`: docs/discussion/closing.md."""
WAITS = {"sleep", "move_on_after", "fail_after", "move_on_at", "fail_at", "sleep_until"}


@functools.cache
def _modules() -> list[tuple[str, ast.Module]]:
    """Every module of src/, parsed once for the rules below (they only read the trees)."""
    return [
        (str(path.relative_to(SRC)), ast.parse(path.read_text(), str(path)))
        for path in sorted(SRC.rglob("*.py"))
    ]


def _is_cancel_scope(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "CancelScope"
    )


def test_only_the_listed_units_of_work_carry_a_public_scope() -> None:
    found = set()
    for name, tree in _modules():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for node in ast.walk(cls):
                if not isinstance(node, ast.Assign) or not _is_cancel_scope(node.value):
                    continue
                for target in node.targets:
                    public = isinstance(target, ast.Attribute) and not target.attr.startswith("_")
                    if public:
                        found.add((name, cls.name))
    assert found == PUBLISHED_SCOPES


def _literal(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float)


def test_no_wait_of_the_runtime_has_a_literal_duration() -> None:
    literal = []
    for name, tree in _modules():
        if name.startswith("bench/"):
            continue  # the harness' own pacing (docs/discussion/cancellation.md)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            args = [*node.args[:1]] if called in WAITS else []
            if called == "CancelScope":
                args = [k.value for k in node.keywords if k.arg == "deadline"]
            if any(_literal(arg) and arg.value != 0 for arg in args):  # type: ignore[attr-defined]
                literal.append(f"{name}:{node.lineno}")
    assert literal == []


STANDALONE = {"bench/_peers/fault_proxy.py"}
"""Scripts run as processes of their own, importing nothing of band-trio's."""


def test_every_http_client_is_given_the_shared_tls_context() -> None:
    unshared = []
    for name, tree in _modules():
        if name in STANDALONE:
            continue
        for node in ast.walk(tree):
            is_client = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("AsyncClient", "Client")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "httpx2"
            )
            if is_client and not any(k.arg == "verify" for k in node.keywords):
                unshared.append(f"{name}:{node.lineno}")
    assert unshared == []


ALLOWED_PRIVATE: set[tuple[str, str]] = set()
"""(importing package, private module) pairs let through: none."""


def _imported(name: str, tree: ast.Module) -> list[tuple[int, str]]:
    """(line, dotted module under band_trio) for every import of `name`, names included."""
    here = ["band_trio", *Path(name).with_suffix("").parts]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level] if node.level else []
            module = ".".join([*base, *(node.module or "").split(".")]).strip(".")
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return [(line, m.removeprefix("band_trio.")) for line, m in found if m.startswith("band_trio.")]


def test_no_package_imports_another_packages_private_module() -> None:
    """A package's `_x` modules are its own; others use its named (internal) API."""
    reaching = set()
    for name, tree in _modules():
        package = Path(name).parts[0] if len(Path(name).parts) > 1 else ""
        for line, module in _imported(name, tree):
            parts = module.split(".")
            if parts[0] == package or len(parts) < 2:
                continue  # its own package's, or a top-level module (band_trio's own)
            if parts[1].startswith("_") and (package, ".".join(parts[:2])) not in ALLOWED_PRIVATE:
                reaching.add(f"{name}:{line} {'.'.join(parts[:2])}")
    assert sorted(reaching) == []


STREAMS = {"runs/_app.py", "platform/_console_stream.py"}
"""Modules that start a streamed answer (server-sent events): not one message."""


def test_every_app_answers_through_the_server_seam() -> None:
    """A whole answer is `band_trio.server.answer`'s: one header order, one place."""
    by_hand = []
    for name, tree in _modules():
        if name.startswith(("server/", "bench/_peers/")) or name in STREAMS:
            continue  # the seam itself; the benchmark's peers serve through uvicorn
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == "http.response.start":
                by_hand.append(f"{name}:{node.lineno}")
    assert by_hand == []
