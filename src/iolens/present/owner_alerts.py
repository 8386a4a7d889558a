"""Owner alerts: a user hears about findings on their own jobs, running or finished.

Admin alerts (`alerts.py`) are about components; a user cares about their job, and the
sooner the better — a finding on a running job can still save the rest of the run. A
user subscribes an email address and/or a webhook URL (`subscriptions` table, one target
per channel); after each pass that can add findings the scheduler sends one alert per
(job, finding code) per subscriber and channel, through `alerts.deliver`, so the
once-per-channel bookkeeping is the admins' (`alerts` rows keyed `job:JOB:CODE:USER`).

Only jobs running or ended since the subscription count: subscribing does not mail the
findings of a user's whole history. Email goes through the `[alerts]` SMTP server of the
server; without one an email subscription's sends fail (recorded, retried).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from iolens.errors import IolensError
from iolens.model.schema import SUBSCRIPTIONS
from iolens.present.alerts import AlertsSection, CheckResult, deliver
from iolens.store.base import Store

log = logging.getLogger(__name__)

CHANNELS = ("email", "webhook")


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def validate(channel: str, target: str) -> None:
    """IolensError unless `target` fits `channel` (an address, an http(s) URL)."""
    if channel not in CHANNELS:
        raise IolensError(f"channel must be one of {', '.join(CHANNELS)}, not {channel!r}")
    if channel == "webhook" and not target.startswith(("http://", "https://")):
        raise IolensError(f"webhook must be an http:// or https:// URL, not {target!r}")
    if channel == "email" and ("@" not in target or any(c in target for c in " ,\r\n")):
        raise IolensError(f"not one email address: {target!r}")


def subscribe(store: Store, user: str, channel: str, target: str) -> dict[str, Any]:
    """Set `user`'s target for `channel` (replacing an earlier one)."""
    validate(channel, target)
    row = {"user": user, "channel": channel, "target": target, "created": _now()}
    with store.transaction():
        store.execute('DELETE FROM subscriptions WHERE "user" = ? AND channel = ?', [user, channel])
        store.append("subscriptions", pa.Table.from_pylist([row], schema=SUBSCRIPTIONS))
    return row


def unsubscribe(store: Store, user: str, channel: str | None = None) -> int:
    """Drop `user`'s subscription on `channel` (all channels if None); how many went."""
    sql, params = 'FROM subscriptions WHERE "user" = ?', [user]
    if channel is not None:
        sql, params = sql + " AND channel = ?", [*params, channel]
    n = store.query("SELECT count(*) AS n " + sql, params).column("n")[0].as_py()
    store.execute("DELETE " + sql, params)
    return int(n)


def subscriptions(store: Store, user: str | None = None) -> list[dict[str, Any]]:
    sql = 'SELECT "user", channel, target, created FROM subscriptions'
    params: list[Any] = []
    if user is not None:
        sql, params = sql + ' WHERE "user" = ?', [user]
    return store.query(sql + ' ORDER BY "user", channel', params).to_pylist()


@dataclass
class JobAlert:
    """One finding of one job, for one subscriber."""

    user: str
    job_id: str
    code: str
    name: str
    severity: str
    state: str | None
    running: bool
    evidence: dict[str, Any]
    recommendation: str | None

    @property
    def key(self) -> str:
        return f"job:{self.job_id}:{self.code}:{self.user}"

    def payload(self) -> dict[str, Any]:
        return {
            "source": "iolens",
            "alert": self.key,
            "user": self.user,
            "job_id": self.job_id,
            "running": self.running,
            "state": self.state,
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "evidence": self.evidence,
            "recommendation": self.recommendation,
        }

    def subject(self) -> str:
        when = "running" if self.running else "ended"
        return f"[iolens] job {self.job_id} ({when}): {self.code} {self.name}"

    def body(self) -> str:
        return (
            f"Job {self.job_id} ({'running' if self.running else self.state or 'ended'}) "
            f"has a {self.severity} finding: {self.code} {self.name}\n\n"
            f"What to do: {self.recommendation or '-'}\n\nevidence:\n"
            f"{json.dumps(self.evidence, indent=2, sort_keys=True)}\n\n"
            f"See `iolens job {self.job_id}` or the job's page. This finding of this job "
            "will not be sent again.\n"
        )


_DUE_SQL = """
SELECT s."user", s.channel, s.target, f.subject_id AS job_id, f.code, f.name, f.severity,
       f.evidence, f.recommendation, j.state, j."end" IS NULL AS running
FROM subscriptions s JOIN jobs j ON j."user" = s."user"
JOIN findings f ON f.subject_kind = 'job' AND f.subject_id = j.job_id
WHERE (j."end" IS NULL OR j."end" >= s.created)
  -- a running job's IOL006 only from the live check: the history rule, if a read analysed
  -- the job before the live pass did, judged a phase the present cut short
  AND NOT (j."end" IS NULL AND f.code = 'IOL006' AND f.evidence NOT LIKE '%"live": true%')
ORDER BY s."user", f.subject_id, f.code, s.channel
"""


def due_alerts(store: Store) -> list[tuple[JobAlert, str, str]]:
    """(alert, channel, target) for every finding of a subscriber's job that counts."""
    out: list[tuple[JobAlert, str, str]] = []
    seen: set[tuple[str, str, str, str]] = set()
    for r in store.query(_DUE_SQL).to_pylist():
        k = (r["user"], r["job_id"], r["code"], r["channel"])
        if k in seen:  # a rule may report a code twice (e.g. per file): one alert
            continue
        seen.add(k)
        try:
            evidence = json.loads(r["evidence"]) if r["evidence"] else {}
        except ValueError:
            evidence = {"raw": r["evidence"]}
        alert = JobAlert(
            r["user"], r["job_id"], r["code"], r["name"], r["severity"], r["state"],
            bool(r["running"]), evidence, r["recommendation"],
        )  # fmt: skip
        out.append((alert, r["channel"], r["target"]))
    return out


def _config_for(base: AlertsSection | None, channel: str, target: str) -> AlertsSection | None:
    """The server's alert settings (SMTP server, timeouts) aimed at one subscriber; None
    for email when the server has no SMTP server to send through."""
    if channel == "webhook":
        update: dict[str, Any] = {"webhook_url": target, "webhook_headers": {}}
    else:
        if base is None or not base.smtp_host:
            return None
        update = {"mail_to": [target]}
    if base is None:
        return AlertsSection.model_construct(**update)
    return base.model_copy(update=update)


def check_owner_alerts(
    store: Store,
    cfg: AlertsSection | None,
    now: datetime | None = None,
    guard: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> CheckResult:
    """Send the owner alerts not sent yet and record each attempt (`alerts.deliver`)."""
    del now  # due-ness depends on findings and subscriptions only
    with guard():
        due = due_alerts(store)
    result = CheckResult(due=len(due))
    sends = []
    for alert, ch, target in due:
        aimed = _config_for(cfg, ch, target)
        if aimed is None:
            log.debug("no SMTP server configured: email alert %s not sent", alert.key)
            continue
        sends.append((aimed, alert, ch))
    result.attempts = deliver(store, sends, guard)
    return result
