"""Repository conventions that a fresh machine and a newcomer rely on."""

from __future__ import annotations

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
