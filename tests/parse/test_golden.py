"""One runner for every parser case folder under tests/cases/parse/<format>/<case>/.

A case holds `input.*` (a copied capture, or an `input/` tree) or `INPUT_PATH` (one line: a
path under ../shared/data, used for captures whose licence does not allow copying), optional
`options.json` (keyword arguments for the parser), `expected.json` and `PROVENANCE.md`.
Rewrite the expected files with `pytest tests/parse --update-golden` or
`IOLENS_UPDATE_GOLDEN=1 pytest tests/parse`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from iolens.parse import infiniband, lctl, lmt, lustre_hist, lustre_jobstats, lustre_stats, slurm
from tests.parse.helpers import CASES, SHARED_DATA, dumps


def _lctl(path: Path, **_: Any) -> Any:
    return [
        {"param": e.param, "line": e.line, "parsed": lctl.parse_value(e, str(path))}
        if e.path.name in lctl.PARSERS
        else {"param": e.param, "line": e.line, "value": e.value}
        for e in lctl.parse_file(path)
    ]


def _lmt(path: Path, **_: Any) -> Any:
    data = lmt.read_lmt(path)
    rates = lmt.ost_rates(data.ost)
    return {
        "filesystem": data.filesystem,
        "counts": {
            "ost": len(data.ost),
            "oss": len(data.oss),
            "mds": len(data.mds),
            "mds_ops": len(data.mds_ops),
            "ost_rates": len(rates),
        },
        "first_ost": data.ost[0] if data.ost else None,
        "last_ost": data.ost[-1] if data.ost else None,
        "first_mds_ops": data.mds_ops[:3],
        "resets": [r for r in rates if r.reset],
        "total_read_bytes_per_s": sum(r.read_bytes_per_s for r in rates),
        "total_write_bytes_per_s": sum(r.write_bytes_per_s for r in rates),
    }


#: Case folder name -> function(input path, **options) -> records.
FORMATS: dict[str, Callable[..., Any]] = {
    "lustre_stats": lambda p, **o: lustre_stats.parse_file(p),
    "job_stats": lambda p, **o: lustre_jobstats.parse_file(p),
    "brw_stats": lambda p, **o: lustre_hist.parse_file(p),
    "rpc_stats": lambda p, **o: lustre_hist.parse_file(p),
    "lctl": _lctl,
    "perfquery": lambda p, **o: infiniband.parse_perfquery_file(p),
    "ibnetdiscover": lambda p, **o: infiniband.parse_ibnetdiscover(p.read_text(), str(p)),
    "ib_sysfs": lambda p, **o: infiniband.read_sysfs_tree(p),
    "sacct": lambda p, **o: slurm.parse_file(p, **o),
    "lmt": _lmt,
}


def _cases() -> list[Any]:
    out = []
    for case in sorted(CASES.glob("*/*/")):
        if (case / "PROVENANCE.md").exists():
            out.append(pytest.param(case, id=f"{case.parent.name}/{case.name}"))
    return out


def _input(case: Path) -> Path:
    pointer = case / "INPUT_PATH"
    if pointer.exists():
        path = SHARED_DATA / pointer.read_text().strip()
        if not path.exists():
            pytest.skip(f"shared data not available: {path}")
        return path
    found = sorted(case.glob("input*"))
    assert len(found) == 1, f"{case}: want exactly one input* or INPUT_PATH, found {found}"
    return found[0]


@pytest.mark.parametrize("case", _cases())
def test_case(case: Path, update_golden: bool) -> None:
    fmt = case.parent.name
    assert fmt in FORMATS, f"no parser registered for case folder {fmt!r}"
    options = (
        json.loads((case / "options.json").read_text()) if (case / "options.json").exists() else {}
    )
    got = dumps(FORMATS[fmt](_input(case), **options))
    expected = case / "expected.json"
    if update_golden or not expected.exists():
        expected.write_text(got)
        if not update_golden:
            pytest.fail(f"{expected} was missing and has been written; check it and re-run")
        return
    assert json.loads(got) == json.loads(expected.read_text())


def test_every_case_folder_is_complete() -> None:
    for case in sorted(CASES.glob("*/*/")):
        assert (case / "PROVENANCE.md").exists(), f"{case} lacks PROVENANCE.md"
        has_input = (case / "INPUT_PATH").exists() or any(case.glob("input*"))
        assert has_input, f"{case} has neither input* nor INPUT_PATH"
