"""iolens finds the lab's real faults from the servers' real signals (issue 20), the short
version `.ci/run` runs: one fail-slow chunkserver and one metadata storm, drawn at random
(`bench/lab.py --quick`), scored against the ground truth the detectors never read.
About 35 minutes: the slow-server detector wants ten busy minutes of a fault.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from bench.lab import run

from tests.lab.harness import Lab


def test_quick_scenarios_are_found(lab: Lab, tmp_path: Path) -> None:
    args = argparse.Namespace(
        scenarios=2,
        quick=True,
        seed=int(os.environ.get("IOLENS_LAB_SEED", "1")),
        warmup=8.0,
        tail=4.0,
        master_cpu=0.05,
        state=str(tmp_path),
        port=28493,
        port_base=lab.port_base,
        json=None,
        keep=True,
        slow_minutes=(12.0, 12.0),
        storm_minutes=(4.0, 4.0),
    )
    result = run(args, lab=lab)
    (tmp_path / "result.json").write_text(json.dumps(result, indent=1, default=str))
    slow, storm = result["slow_server"], result["metadata_storm"]
    detail = json.dumps({k: v for k, v in result.items() if k != "config"}, default=str)[:6000]
    assert slow["faults"] == 1 and slow["found"] == 1, detail
    assert slow["false_episodes"] == 0, detail
    assert slow["iou_median"] >= 0.5, detail
    assert storm["faults"] == 1 and storm["found"] == 1, detail
    assert storm["false_episodes"] == 0, detail
    assert storm["culprit_named"] == 1, detail
