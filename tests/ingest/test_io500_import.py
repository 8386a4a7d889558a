"""`iolens import io500`: both result formats, per-phase times and tails, idempotence,
and one clear error per unreadable directory."""

from __future__ import annotations

from datetime import datetime

import pytest

from iolens.errors import InputError
from iolens.ingest.importers import io500
from iolens.store import DuckDBStore
from tests.io500 import BASE, SAMPLES, write_legacy_run, write_run

needs_samples = pytest.mark.skipif(
    not SAMPLES.is_dir(), reason="shared IO500 submission samples not available"
)

SAMPLE_RUNS = {
    # run_id (the result directory's name): (system, api, format, nodes, procs)
    "2023.11.07-03.43.32": ("anl-aurora-daos-2023-sub688", "DFS", "io500", 300, 62400),
    "good-2023.03.22-18.10.33": ("asu-sol-beegfs-2023-sub642", "POSIX", "io500", 10, 160),
    "2024.05.03-09.25.44": ("cyfronet-helios-lustre-2024-sub708", "POSIX", "io500", 80, 640),
    "results": ("dkrz-mistral-lustre01-2019-sub137-legacyformat", "MPIIO", "io500.sh", 100, 1200),
    "dkrz-mistral-lustre02-2021-sub539": (
        "dkrz-mistral-lustre02-2021-sub539",
        "POSIX",
        "io500",
        10,
        80,
    ),
}


def _count(store: DuckDBStore, table: str) -> int:
    return store.query(f"SELECT count(*) AS n FROM {table}").to_pylist()[0]["n"]


@needs_samples
def test_the_five_sample_submissions_import(tmp_path):
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        result = io500.import_paths(store, [SAMPLES])
        assert result.errors == []
        runs = {r["run_id"]: r for r in store.query("SELECT * FROM io500_runs").to_pylist()}
        # Sol's submission carries a copy of its summary at the top: one run, not two.
        assert set(runs) == set(SAMPLE_RUNS)
        for run_id, (system, api, fmt, nodes, procs) in SAMPLE_RUNS.items():
            r = runs[run_id]
            assert (r["system"], r["api"], r["format"], r["nodes"], r["procs"]) == (
                system,
                api,
                fmt,
                nodes,
                procs,
            ), run_id
            assert r["valid"] is True and r["timestamp"] is not None
        helios = runs["2024.05.03-09.25.44"]
        assert (helios["score"], helios["bw_score"], helios["md_score"]) == (
            153.38664,
            122.31263,
            192.355126,
        )
        assert helios["version"] == "io500-isc24_v3" and helios["mode"] == "standard"
        assert helios["timestamp"] == datetime(2024, 5, 3, 9, 25, 48)
        assert '"api": "POSIX"' in helios["config"]
        # 12 phases each (find included; the `timestamp` marker is not a phase)
        per_run = store.query(
            "SELECT run_id, count(*) AS n, count(DISTINCT unit) AS units FROM io500_phases "
            "GROUP BY run_id"
        ).to_pylist()
        assert {r["run_id"]: (r["n"], r["units"]) for r in per_run} == {
            k: (12, 2) for k in SAMPLE_RUNS
        }


@needs_samples
def test_phase_values_times_and_tails(tmp_path):
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        io500.import_paths(store, [SAMPLES])
        rows = store.query("SELECT * FROM io500_phases").to_pylist()
    ph = {(r["run_id"], r["phase"]): r for r in rows}
    # the current format: value, unit, runtime, times and command from result.txt
    w = ph[("2024.05.03-09.25.44", "ior-easy-write")]
    assert (w["value"], w["unit"], w["time_s"]) == (352.803032, "GiB/s", 386.698)
    assert w["t_start"] == datetime(2024, 5, 3, 9, 25, 48)
    assert w["t_end"] == datetime(2024, 5, 3, 9, 32, 15)
    assert w["value_stonewall"] == 403.55 and w["command"].startswith("./ior ")
    assert w["latency_s"] == pytest.approx(0.000071)
    # the stonewall spread (IOR pairs) and the per-rank CSV runtimes
    assert (w["rank_items_min"], w["rank_items_max"]) == (78934, 109118)
    assert w["rank_time_p50"] <= w["rank_time_p90"] <= w["rank_time_p99"] <= w["rank_time_max"]
    assert w["rank_time_max"] == pytest.approx(386.61086488)
    md = ph[("2024.05.03-09.25.44", "mdtest-easy-write")]
    assert (md["rank_items_min"], md["rank_items_max"]) == (49252, 69315)
    assert md["rank_time_max"] == pytest.approx(372.42950606)
    assert ph[("2024.05.03-09.25.44", "mdtest-hard-stat")]["unit"] == "kIOPS"
    # mdtest 1.9 / IOR 3.1 era: values labelled GB/s are GiB/s (MiB/s / 1024)
    legacy = ph[("results", "ior-easy-write")]
    assert (legacy["value"], legacy["unit"], legacy["time_s"]) == (40.915, "GiB/s", 586.58)
    assert legacy["command"].startswith("srun ")
    assert ph[("results", "mdtest-hard-delete")]["value"] == 6.335
    # Mistral's ior-hard stragglers: the slowest rank did 3,091 pairs, the fastest 25,000
    hard = ph[("dkrz-mistral-lustre02-2021-sub539", "ior-hard-write")]
    assert (hard["rank_items_min"], hard["rank_items_max"]) == (3091, 25000)


@needs_samples
def test_reimport_is_idempotent_and_relabels(tmp_path):
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        io500.import_paths(store, [SAMPLES])
        io500.import_paths(store, [SAMPLES])
        assert (_count(store, "io500_runs"), _count(store, "io500_phases")) == (5, 60)
        helios = SAMPLES / "cyfronet-helios-lustre-2024-sub708"
        io500.import_paths(store, [helios], system="helios")
        assert (_count(store, "io500_runs"), _count(store, "io500_phases")) == (5, 60)
        systems = store.query(
            "SELECT system FROM io500_runs WHERE run_id = '2024.05.03-09.25.44'"
        ).to_pylist()
        assert systems == [{"system": "helios"}]
        assert store.query(
            "SELECT count(*) AS n FROM io500_phases WHERE system = 'helios'"
        ).to_pylist() == [{"n": 12}]


def test_constructed_current_format(tmp_path):
    d = write_run(
        tmp_path / "site" / "results" / "2024.01.02-03.04.05",
        {"ior-hard-write": 3.5},
        api="MPIIO",
        invalid=("ior-hard-read",),
        rank_csv=True,
    )
    run = io500.read_run(d)
    assert run.run_id == "2024.01.02-03.04.05" and run.system == "site"
    assert (run.api, run.nodes, run.procs, run.version) == ("MPIIO", 10, 80, "io500-isc23_v1")
    assert run.value("ior-hard-write") == 3.5 and run.value("mdtest-easy-stat") == 200.0
    assert run.phases["ior-hard-read"].valid is False and run.valid is False
    assert run.phases["ior-easy-write"].rank_time_max == pytest.approx(379.0)
    assert run.phases["ior-easy-write"].rank_time_p50 == pytest.approx(339.5)
    assert run.timestamp == datetime(2024, 5, 3, 9, 0, 0)
    assert "timestamp" not in run.phases


def test_result_ini_alone_and_time_zone(tmp_path):
    from zoneinfo import ZoneInfo

    d = write_run(tmp_path / "r1", summary=False)
    run = io500.read_run(d, system="x", tz=ZoneInfo("Europe/Berlin"))
    assert run.value("ior-easy-write") == BASE["ior-easy-write"]
    assert run.phases["ior-easy-write"].unit == "GiB/s"
    assert run.phases["ior-easy-write"].time_s == 300.0
    assert run.score is not None and run.bw_score is not None
    assert run.timestamp == datetime(2024, 5, 3, 7, 0, 0)  # 09:00 CEST is 07:00 UTC


def test_constructed_legacy_format(tmp_path):
    d = write_legacy_run(tmp_path / "old" / "2018.05.12-13.55.14", {"ior-easy-write": 41.5})
    run = io500.read_run(d)
    assert run.format == "io500.sh" and run.version == "io500.sh"
    assert run.value("ior-easy-write") == 41.5 and run.phases["ior-easy-write"].unit == "GiB/s"
    assert run.value("mdtest-hard-read") == BASE["mdtest-hard-read"]
    assert (run.api, run.nodes, run.procs) == ("MPIIO", 100, 1200)
    assert run.timestamp == datetime(2018, 5, 12, 13, 55, 14)
    assert run.config["io500.sh"]["io500_info_system_name"] == "testsys"
    assert run.bw_score is not None and run.valid


def test_errors_name_the_directory_and_do_not_stop_the_import(tmp_path):
    good = write_run(tmp_path / "runs" / "good")
    bad = tmp_path / "runs" / "bad"
    bad.mkdir()
    (bad / "result_summary.txt").write_text("IO500 version io500-isc23_v1\nnothing here\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        result = io500.import_paths(store, [tmp_path / "runs", empty, tmp_path / "missing"])
        assert [r.run_id for r in result.runs] == [good.name]
        msgs = [str(e) for e in result.errors]
        assert any(str(bad) in m and "no IO500 results" in m for m in msgs)
        assert any(str(empty) in m and "no IO500 result directory" in m for m in msgs)
        assert any("missing" in m and "no such file" in m for m in msgs)
        assert _count(store, "io500_runs") == 1
    with pytest.raises(InputError, match="not a directory"):
        io500.read_run(tmp_path / "missing")


def test_summary_parser_handles_both_generations():
    run = io500.Run("r", "s", "/r", "io500")
    io500.parse_summary(
        "[RESULT]       ior-easy-write      352.803032 GiB/s : time 386.698 seconds [INVALID]\n"
        "[RESULT] BW   phase 1      ior_easy_read     40.915 GB/s : time 586.58 seconds\n"
        "[RESULT] IOPS phase 2  mdtest_hard_write     10.757 kiops : time 379.67 seconds\n"
        "[RESULT-invalid]    mdtest-easy-write        0.011581 kIOPS : time 300.392 seconds\n"
        "[SCORE] Bandwidth 12.6775 GB/s : IOPS 18.8796 kiops : TOTAL 15.4708\n",
        run,
    )
    assert run.phases["ior-easy-write"].valid is False
    assert run.phases["ior-easy-read"].value == 40.915
    assert run.phases["mdtest-hard-write"].unit == "kIOPS"
    assert run.phases["mdtest-easy-write"].valid is False  # ISC20's [RESULT-invalid]
    assert run.phases["mdtest-easy-write"].value == 0.011581
    assert (run.bw_score, run.md_score, run.score, run.valid) == (12.6775, 18.8796, 15.4708, True)
