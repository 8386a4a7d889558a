"""Alerts against a real SMTP server (aiosmtpd) and a real webhook receiver on loopback:
once per episode and channel, nothing for short or mild episodes, dead servers retried."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from pathlib import Path

import pyarrow as pa
import pytest

from iolens.errors import InputError
from iolens.model.schema import ANOMALIES
from iolens.present.alerts import AlertsSection, episode_key, load_alerts_config
from iolens.present.alerts import check_alerts as _check_alerts
from iolens.store import DuckDBStore
from tests.conftest import run_cli
from tests.loopback import free_port
from tests.receivers import Auth, Webhook, smtp_server


@pytest.fixture
def webhook():
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def smtp():
    port = free_port()
    ctl, box = smtp_server(port)
    yield port, box
    ctl.stop()


# -- episodes ------------------------------------------------------------------------------
def make_episodes(now: datetime) -> list[dict]:
    def episode(kind, comp, start_min_ago, end_min_ago=None, severity="warning", ckind="ost"):
        return {
            "kind": kind,
            "component_kind": ckind,
            "component_id": comp,
            "start": now - timedelta(minutes=start_min_ago),
            "end": None if end_min_ago is None else now - timedelta(minutes=end_min_ago),
            "severity": severity,
            "evidence": json.dumps({"bw_ratio": 0.1}),
            "detector": "test",
            "created": now,
        }

    return [
        episode("slow_ost", "lustre-OST0002", 40),  # ongoing for 40 min: alert
        episode("slow_ost", "lustre-OST0005", 5),  # ongoing but only 5 min: not yet
        episode("slow_forwarder", "fwd002", 90, 60, ckind="forwarder"),  # 30 min, ended: alert
        episode("metadata_storm", "mdt0", 60, severity="info", ckind="mds"),  # too mild
        episode("slow_ost", "lustre-OST0007", 60 * 48, 60 * 47),  # long but two days old
    ]


# The in-process checks run at this `now`, however long the suite has been running.
NOW = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
EPISODES = make_episodes(NOW)
DUE = [
    episode_key("slow_ost", "lustre-OST0002", EPISODES[0]["start"]),
    episode_key("slow_forwarder", "fwd002", EPISODES[2]["start"]),
]


def check_alerts(store, cfg):
    return _check_alerts(store, cfg, now=NOW)


@pytest.fixture
def store(tmp_path):
    with DuckDBStore(tmp_path / "a.duckdb") as s:
        s.append("anomalies", pa.Table.from_pylist(EPISODES, schema=ANOMALIES))
        yield s


def config(**kw) -> AlertsSection:
    return AlertsSection(**kw)


def alert_rows(store) -> list[dict]:
    return store.query("SELECT * FROM alerts ORDER BY sent_at, episode, channel").to_pylist()


# -- tests ---------------------------------------------------------------------------------
def test_long_episodes_alert_once_per_channel(store, smtp, webhook):
    port, box = smtp
    cfg = config(
        smtp_host="127.0.0.1",
        smtp_port=port,
        mail_from="iolens@cluster",
        mail_to=["ops@cluster", "oncall@cluster"],
        webhook_url=webhook.url,
        webhook_headers={"Authorization": "Bearer hook-secret"},
    )
    first = check_alerts(store, cfg)
    assert (first.due, first.sent, first.failed) == (2, 4, 0)
    assert len(box.messages) == 2 and len(webhook.bodies) == 2
    mails = {
        message_from_bytes(raw)["X-Iolens-Episode"]: (f, to, raw) for f, to, raw in box.messages
    }
    assert set(mails) == set(DUE)
    sender, rcpts, raw = mails[DUE[0]]
    mail = message_from_bytes(raw)
    assert sender == "iolens@cluster" and rcpts == ["ops@cluster", "oncall@cluster"]
    assert "slow_ost on lustre-OST0002" in mail["Subject"] and "ongoing" in mail["Subject"]
    assert '"bw_ratio": 0.1' in mail.get_payload()
    bodies = sorted((b["json"] for b in webhook.bodies), key=lambda b: b["episode"])
    assert [b["episode"] for b in bodies] == sorted(DUE)
    ended = next(b for b in bodies if b["kind"] == "slow_forwarder")
    assert ended["ongoing"] is False and ended["duration_minutes"] == 30.0
    assert ended["evidence"] == {"bw_ratio": 0.1}
    assert {b["auth"] for b in webhook.bodies} == {"Bearer hook-secret"}
    rows = alert_rows(store)
    assert {(r["episode"], r["channel"]) for r in rows} == {
        (k, c) for k in DUE for c in ("email", "webhook")
    }
    assert all(r["ok"] for r in rows)
    # Again, with the episodes still open: nothing is repeated.
    again = check_alerts(store, cfg)
    assert (again.due, again.sent, again.failed) == (2, 0, 0)
    assert len(box.messages) == 2 and len(webhook.bodies) == 2 and len(alert_rows(store)) == 4


def test_short_mild_and_filtered_episodes_send_nothing(store, webhook):
    # Only the 5-minute episode and the info one match the kinds: neither is due.
    cfg = config(webhook_url=webhook.url, kinds=["metadata_storm"], min_duration_minutes=15)
    assert check_alerts(store, cfg).due == 0
    assert check_alerts(store, config(webhook_url=webhook.url, min_duration_minutes=120)).due == 0
    assert webhook.bodies == [] and alert_rows(store) == []
    # Lowering the bar lets them through: the info storm (60 min) and, with no age limit,
    # the two-day-old episode.
    loose = config(webhook_url=webhook.url, min_severity="info", max_age_hours=None)
    assert check_alerts(store, loose).sent == 4
    assert {b["json"]["component_id"] for b in webhook.bodies} == {
        "lustre-OST0002",
        "fwd002",
        "mdt0",
        "lustre-OST0007",
    }


def test_dead_servers_are_recorded_and_retried(store):
    smtp_port, hook_port = free_port(), free_port()
    cfg = config(
        smtp_host="127.0.0.1",
        smtp_port=smtp_port,
        mail_to=["ops@cluster"],
        webhook_url=f"http://127.0.0.1:{hook_port}/hook",
        timeout_s=5,
    )
    down = check_alerts(store, cfg)
    assert (down.due, down.sent, down.failed) == (2, 0, 4)
    rows = alert_rows(store)
    assert len(rows) == 4 and not any(r["ok"] for r in rows)
    assert all("Connect" in r["detail"] or "refused" in r["detail"] for r in rows), rows
    # A webhook that answers 500 is a failure too.
    hook = Webhook(hook_port, status=500)
    ctl, box = smtp_server(smtp_port)
    try:
        half = check_alerts(store, cfg)
        assert (half.sent, half.failed) == (2, 2) and len(box.messages) == 2
        assert {a.channel for a in half.attempts if not a.ok} == {"webhook"}
        hook.status = 200
        up = check_alerts(store, cfg)
        assert (up.sent, up.failed) == (2, 0)
        assert {a.channel for a in up.attempts} == {"webhook"}  # mail went out already
        assert check_alerts(store, cfg).attempts == []
        assert len(box.messages) == 2 and len(hook.bodies) == 4  # 2 refused + 2 accepted
    finally:
        ctl.stop()
        hook.close()
    ok = [r for r in alert_rows(store) if r["ok"]]
    assert sorted((r["episode"], r["channel"]) for r in ok) == sorted(
        (k, c) for k in DUE for c in ("email", "webhook")
    )


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_smtp_login(store, monkeypatch):
    port = free_port()
    auth = Auth("iolens", "pw")
    ctl, box = smtp_server(port, auth)
    try:
        bad = config(
            smtp_host="127.0.0.1", smtp_port=port, mail_to=["a@b"], smtp_user="iolens",
            smtp_password="wrong",
        )  # fmt: skip
        assert check_alerts(store, bad).failed == 2 and box.messages == []
        good = bad.model_copy(update={"smtp_password": None, "smtp_password_env": "IOLENS_PW"})
        monkeypatch.setenv("IOLENS_PW", "pw")
        assert check_alerts(store, good).sent == 2
        assert len(box.messages) == 2 and auth.logins == [b"iolens", b"iolens"]
    finally:
        ctl.stop()


def _toml(path: Path, body: str) -> Path:
    path.write_text(body)
    return path


def test_config_file_errors_name_the_field(tmp_path):
    good = _toml(
        tmp_path / "a.toml",
        '[alerts]\nwebhook_url = "http://x/"\nkinds = ["slow_ost"]\nmin_severity = "critical"\n',
    )
    cfg = load_alerts_config(good)
    assert cfg.kinds == ["slow_ost"] and cfg.min_duration_minutes == 15
    assert cfg.channels() == ["webhook"]
    cases = {
        '[alerts]\nwebhook_url = "http://x/"\nsmtp_hots = "m"\n': "smtp_hots",
        "[alerts]\nmin_duration_minutes = 5\n": "smtp_host with mail_to, or webhook_url",
        '[alerts]\nsmtp_host = "m"\n': "no one to mail",
        '[alerts]\nwebhook_url = "http://x/"\nmin_severity = "loud"\n': "min_severity",
        "[alerts\n": "not valid TOML",
    }
    for i, (body, message) in enumerate(cases.items()):
        with pytest.raises(InputError, match=message):
            load_alerts_config(_toml(tmp_path / f"bad{i}.toml", body))
    with pytest.raises(InputError, match="no such"):
        load_alerts_config(tmp_path / "missing.toml")


def test_alerts_check_command(tmp_path, webhook):
    db = tmp_path / "cli.duckdb"
    with DuckDBStore(db) as s:
        fresh = make_episodes(datetime.now(UTC).replace(tzinfo=None))  # the CLI uses the clock
        s.append("anomalies", pa.Table.from_pylist(fresh, schema=ANOMALIES))
    conf = _toml(tmp_path / "alerts.toml", f'[alerts]\nwebhook_url = "{webhook.url}"\n')
    res = run_cli("alerts", "check", "--db", str(db), "--config", str(conf), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert (doc["due"], doc["sent"], doc["failed"]) == (2, 2, 0)
    assert len(webhook.bodies) == 2
    res = run_cli("alerts", "check", "--db", str(db), "--config", str(conf))
    assert res.returncode == 0 and "0 alert(s) sent" in res.stdout, res.stdout
    dead = _toml(
        tmp_path / "dead.toml",
        f'[alerts]\nsmtp_host = "127.0.0.1"\nsmtp_port = {free_port()}\nmail_to = ["a@b"]\n',
    )
    res = run_cli("alerts", "check", "--db", str(db), "--config", str(dead))
    assert res.returncode == 1 and "FAILED email" in res.stdout, res.stdout
    bad = _toml(tmp_path / "bad.toml", "[alerts]\nkinds = []\n")
    res = run_cli("alerts", "check", "--db", str(db), "--config", str(bad))
    assert res.returncode == 2 and res.stderr.startswith("error:") and "bad.toml" in res.stderr
