"""The Spack recipe installs what pyproject.toml declares (no Spack needed: both parsed)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "deploy" / "spack" / "py-iolens" / "package.py"


def spack_name(requirement: str) -> tuple[str, str]:
    """`PyWavelets>=1.6` -> (`py-pywavelets`, `@1.6:`); Spack's naming of PyPI packages."""
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(?:>=\s*([\w.]+))?", requirement.strip())
    assert m, f"pyproject requirement the recipe cannot mirror: {requirement!r}"
    name = "py-" + re.sub(r"[_.]", "-", m[1].lower())
    return name, f"@{m[2]}:" if m[2] else ""


def recipe() -> tuple[list[str], dict[str, dict[str, str]]]:
    """(versions, {"": base depends_on, "+server": ...}) as `name -> version range`."""
    tree = ast.parse(RECIPE.read_text())
    versions: list[str] = []
    deps: dict[str, dict[str, str]] = {}

    def visit(node: ast.AST, when: str) -> None:
        if isinstance(node, ast.With):
            call = node.items[0].context_expr
            assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            cond = ast.literal_eval(call.args[0]) if call.func.id == "when" else when
            for child in node.body:
                visit(child, cond)
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            fn = call.func.id if isinstance(call.func, ast.Name) else ""
            if fn == "version":
                versions.append(ast.literal_eval(call.args[0]))
            elif fn == "depends_on":
                spec = ast.literal_eval(call.args[0])
                kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
                name, _, rng = spec.partition("@")
                deps.setdefault(kw.get("when", when), {})[name] = (
                    f"@{rng}" if rng else "",
                    kw.get("type", ("build", "link")),
                )
        for child in ast.iter_child_nodes(node):
            visit(child, when)

    visit(tree, "")
    return versions, deps


def test_version_and_dependencies_match_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    meta = project["project"]
    versions, deps = recipe()
    assert versions == [meta["version"]]

    def run_deps(when: str) -> dict[str, str]:
        return {
            n: rng
            for n, (rng, types) in deps.get(when, {}).items()
            if "run" in types and n.startswith("py-")
        }

    assert run_deps("") == dict(spack_name(r) for r in meta["dependencies"])
    assert run_deps("+server") == dict(
        spack_name(r) for r in meta["optional-dependencies"]["server"]
    )
    assert meta["optional-dependencies"]["agent"] == []  # the base is the agent
    py = meta["requires-python"].removeprefix(">=")
    assert deps[""]["python"][0] == f"@{py}:"
    build = dict(spack_name(r) for r in project["build-system"]["requires"])
    assert {n: r for n, (r, t) in deps[""].items() if t == "build"} == {
        **build,
        "c": "",
    }


def test_name_mapping():
    assert spack_name("PyWavelets>=1.6") == ("py-pywavelets", "@1.6:")
    assert spack_name("prometheus-client>=0.20") == ("py-prometheus-client", "@0.20:")
    assert spack_name("wheel") == ("py-wheel", "")
