"""Repository conventions that a fresh machine and a newcomer rely on."""

from __future__ import annotations

import ast
import graphlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- setup-commands -->\s*```(?:sh|bash)?\n(.*?)```", text, re.S)
    assert block, "README must keep its set-up commands in the marked block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_has_exactly_two_setup_commands():
    cmds = readme_commands()
    assert len(cmds) == 2
    assert cmds[0].endswith("iolens demo")
    assert "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def test_every_cli_command_is_documented():
    from iolens.present.cli.main import app

    docs = (ROOT / "README.md").read_text() + (ROOT / "docs" / "cli.md").read_text()
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    for group in app.registered_groups:
        names += [
            f"{group.name} {c.name or c.callback.__name__}"
            for c in group.typer_instance.registered_commands
        ]
    for name in names:
        assert f"iolens {name}" in docs, f"`iolens {name}` is not documented"


@pytest.mark.skipif(
    shutil.which("ruff") is None and not Path(sys.prefix, "bin", "ruff").exists(),
    reason="ruff not installed",
)
def test_ruff_clean():
    ruff = shutil.which("ruff") or str(Path(sys.prefix, "bin", "ruff"))
    res = subprocess.run(
        [ruff, "check", "src", "tests", "bench"], cwd=ROOT, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr
    res = subprocess.run(
        [ruff, "format", "--check", "src", "tests", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, "run `ruff format`:\n" + res.stdout + res.stderr


def test_layers_import_downward_only():
    lint = shutil.which("lint-imports") or str(Path(sys.prefix, "bin", "lint-imports"))
    if not Path(lint).exists():
        pytest.skip("import-linter not installed")
    res = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def import_graph(src: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, from every import statement in its
    source, inside functions and `if TYPE_CHECKING:` blocks too (import-linter's view:
    `from a.b import c` names `a.b.c` when that is a module, else `a.b`; the parent
    packages a dotted name runs are not counted)."""
    modules: dict[str, Path] = {}
    for path in (src / package).rglob("*.py"):
        parts = path.relative_to(src).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                    base = f"{up}.{base}" if base else up
                for a in node.names:
                    target = f"{base}.{a.name}"
                    if target in modules:
                        graph[name].add(target)
                    elif base in modules:
                        graph[name].add(base)
        graph[name].discard(name)
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


def test_no_import_cycles():
    """Dependencies point one way: a module never needs, even lazily, one that needs it."""
    cycle = import_cycle(import_graph(ROOT / "src", "iolens"))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_import_cycle_check_sees_imports_inside_functions(tmp_path: Path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .. import a\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.c"] == {"pkg.a"} and graph["pkg.sub.b"] == {"pkg.a"}
    assert sorted(import_cycle(graph) or []) == ["pkg.a", "pkg.a", "pkg.sub.b"]
    (pkg / "sub" / "b.py").write_text("def f():\n    import json\n")
    assert import_cycle(import_graph(tmp_path, "pkg")) is None


def test_generated_docs_are_current():
    res = subprocess.run(
        [sys.executable, "scripts/gen_docs.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout


def test_every_rule_documents_symptom_why_and_fix():
    from iolens.analyze.findings import JOB_RULES

    codes = [r.code for r in JOB_RULES]
    assert len(set(codes)) == len(codes) and all(re.fullmatch(r"IOL\d{3}", c) for c in codes)
    for rule in JOB_RULES:
        for part in ("Symptom:", "Why it hurts:", "What to do:"):
            assert part in (rule.__doc__ or ""), f"{rule.code} lacks {part}"
