"""The Grafana dashboards in deploy/grafana: valid dashboards whose every PromQL expression
asks only for metrics, and labels, that `/metrics/site` exposes (so a renamed metric breaks
this test, not a site's dashboard), and parses as PromQL (promtool, when installed)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from iolens.present.metrics import METRICS, SPECS

ROOT = Path(__file__).resolve().parents[2]
BOARDS = sorted((ROOT / "deploy" / "grafana").glob("*.json"))

#: What PromQL itself names: functions, aggregations, keywords.
_PROMQL = """
sum min max avg count stddev stdvar topk bottomk quantile count_values group by without
on ignoring group_left group_right bool and or unless offset rate irate increase delta
idelta deriv time scalar vector abs ceil floor round clamp clamp_min clamp_max
histogram_quantile label_replace label_join sort sort_desc absent absent_over_time
avg_over_time max_over_time min_over_time sum_over_time count_over_time last_over_time
timestamp changes resets predict_linear inf nan
"""
PROMQL_WORDS = frozenset(_PROMQL.split())
#: Labels Prometheus adds to every scraped series.
TARGET_LABELS = frozenset({"job", "instance"})

IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _exprs(board: dict[str, Any]) -> list[str]:
    out = []
    for panel in board["panels"]:
        out += [t["expr"] for t in panel.get("targets", [])]
        out += [t["expr"] for p in panel.get("panels", []) for t in p.get("targets", [])]
    for var in board.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", q)
            assert m, f"variable {var['name']}: {q}"
            out.append(f"{m[1]}{{{m[2]}!=''}}")  # the same demands as PromQL
    return out


def parse(expr: str) -> tuple[set[str], list[tuple[str, set[str]]], set[str]]:
    """(metric names, (metric, matcher labels) pairs, grouping labels) of a PromQL expr."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals hold values only
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # range selectors: [5m], [$__rate_interval]
    bare = re.sub(r"\$\{?\w+\}?", "0", bare)  # Grafana variables outside strings
    selectors = [
        (m[1], {lab for lab in re.findall(r"([a-zA-Z_]\w*)\s*[=!]~?", m[2])})
        for m in re.finditer(r"([a-zA-Z_:][\w:]*)?\s*\{([^}]*)\}", bare)
    ]
    grouping = {
        lab
        for m in re.finditer(
            r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", bare
        )
        for lab in IDENT.findall(m[1])
    }
    no_groups = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", bare
    )
    no_matchers = re.sub(r"\{[^}]*\}", "", no_groups)
    names = {
        w for w in IDENT.findall(re.sub(r"\b\d[\w.]*", "", no_matchers)) if w not in PROMQL_WORDS
    }
    return names, selectors, grouping


def test_the_parser_finds_names_and_labels():
    names, sel, groups = parse(
        'topk(10, sum by (component) (rate(iolens_x_total{kind="ost",job_id=~"$j"}[5m])))'
        " / on(kind) iolens_y + 2"
    )
    assert names == {"iolens_x_total", "iolens_y"}
    assert sel == [("iolens_x_total", {"kind", "job_id"})]
    assert groups == {"component", "kind"}


def test_there_are_a_system_and_a_job_dashboard():
    assert {p.name for p in BOARDS} >= {"iolens-system.json", "iolens-job.json"}


@pytest.mark.parametrize("path", BOARDS, ids=lambda p: p.name)
def test_a_grafana_dashboard_with_a_templated_prometheus(path: Path):
    board = json.loads(path.read_text())
    assert board["title"] and board["uid"] and 36 <= board["schemaVersion"] <= 41
    assert [i["name"] for i in board["__inputs"]] == ["DS_PROMETHEUS"]
    assert board["__inputs"][0]["pluginId"] == "prometheus"
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        if panel["type"] == "row":
            continue
        assert panel["title"] and panel.get("description"), panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
        assert panel["targets"], panel["title"]
        for t in panel["targets"]:
            assert t["datasource"]["uid"] == "${DS_PROMETHEUS}"


@pytest.mark.parametrize("path", BOARDS, ids=lambda p: p.name)
def test_every_expression_asks_for_exported_metrics_and_labels(path: Path):
    exprs = _exprs(json.loads(path.read_text()))
    assert len(exprs) >= 8
    used: set[str] = set()
    for expr in exprs:
        names, selectors, grouping = parse(expr)
        assert names, expr
        unknown = names - SPECS.keys()
        assert not unknown, f"{path.name}: {expr} asks for {unknown}, not exported"
        for name, labels in selectors:
            if name:  # `{...}` without a name is not used by the dashboards
                allowed = set(SPECS[name].labels) | TARGET_LABELS
                assert labels <= allowed, f"{path.name}: {expr}: {labels - allowed}"
        known = set().union(*(SPECS[n].labels for n in names)) | TARGET_LABELS
        assert grouping <= known, f"{path.name}: {expr}: {grouping - known}"
        used |= names
    if path.name == "iolens-system.json":  # the system view covers every component figure
        components = {s.name for s in METRICS if s.name.startswith("iolens_component_")}
        skipped = {"iolens_component_peak_requests_per_second",
                   "iolens_component_sample_interval_seconds"}  # fmt: skip
        assert components - skipped <= used, components - skipped - used


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian: prometheus) absent")
def test_every_expression_is_valid_promql(tmp_path: Path):
    rules = []
    for path in BOARDS:
        for i, expr in enumerate(_exprs(json.loads(path.read_text()))):
            concrete = re.sub(r"\$\{?(\w+)\}?", "x", expr)
            rules.append({"record": f"iolens:{path.stem.replace('-', '_')}:{i}", "expr": concrete})
    rule_file = tmp_path / "rules.yml"
    rule_file.write_text(json.dumps({"groups": [{"name": "dashboards", "rules": rules}]}))
    res = subprocess.run(
        ["promtool", "check", "rules", str(rule_file)], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr


RULES = ROOT / "deploy" / "prometheus" / "iolens-alerts.yml"


def _rule_exprs(text: str) -> list[str]:
    """The `expr:` of each rule: one line, or a folded `>` block (the file's two forms)."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(\s*)expr:\s*(.*)$", line)
        if not m:
            continue
        if m[2].strip() != ">":
            out.append(m[2].strip())
            continue
        block = []
        for cont in lines[i + 1 :]:
            if len(cont) - len(cont.lstrip()) <= len(m[1]):
                break
            block.append(cont.strip())
        out.append(" ".join(block))
    return out


def test_alert_rules_ask_for_exported_metrics_and_labels():
    exprs = _rule_exprs(RULES.read_text())
    assert len(exprs) == RULES.read_text().count("- alert:") >= 3
    for expr in exprs:
        names, selectors, _ = parse(expr)
        assert names and names <= SPECS.keys(), expr
        for name, labels in selectors:
            assert labels <= set(SPECS[name].labels) | TARGET_LABELS, expr


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian: prometheus) absent")
def test_alert_rules_pass_promtool():
    res = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    n = RULES.read_text().count("- alert:")
    assert res.returncode == 0 and f"SUCCESS: {n} rules found" in res.stdout, (
        res.stdout + res.stderr
    )
