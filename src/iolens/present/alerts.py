"""Alerts: tell the administrators when a component anomaly lasts (Beacon section 4.2).

Beacon mails the administration team when a detected anomaly persists beyond a
configurable time; short episodes are mostly transient and not worth waking anyone for.
Here an episode of the `anomalies` table that has lasted `min_duration_minutes` (ongoing
episodes count up to now), is of a configured kind and at least `min_severity`, is sent
once per channel — an email through an SMTP server and/or a JSON POST to a webhook.

Each attempt is a row of the `alerts` table (episode key `kind:component:start`, channel,
ok). A channel that has an `ok` row for an episode is never used for it again, so an
ongoing episode alerts once however often the check runs; a failed attempt (server down,
refused, timed out) is logged and recorded with `ok = false`, and the next check tries
again. Sending happens outside the store: in `iolens serve` the writer's lock is held only
to read episodes and to record attempts, never while waiting for a mail server.
"""

from __future__ import annotations

import json
import logging
import os
import smtplib
import ssl
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, model_validator

from iolens.model.schema import ALERTS
from iolens.store.base import Store
from iolens.tomlconfig import load_toml

log = logging.getLogger(__name__)

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
Severity = Literal["info", "warning", "critical"]


class AlertsSection(BaseModel):
    """The `[alerts]` table of an alerts config file."""

    model_config = ConfigDict(extra="forbid")

    smtp_host: str | None = Field(None, description="SMTP server; no host, no email")
    smtp_port: int = Field(25, ge=1, le=65535, description="SMTP port (587 submission, 465 TLS)")
    smtp_starttls: bool = Field(False, description="Upgrade the connection with STARTTLS")
    smtp_ssl: bool = Field(False, description="Implicit TLS from the start (port 465)")
    smtp_user: str | None = Field(None, description="Log in as this user")
    smtp_password: str | None = Field(None, description="Password for smtp_user")
    smtp_password_env: str | None = Field(
        None, description="Environment variable holding the password (keeps it out of files)"
    )
    mail_from: str = Field("iolens@localhost", description="Sender address")
    mail_to: list[str] = Field(default_factory=list, description="Recipients")
    webhook_url: str | None = Field(None, description="POST each alert as JSON here")
    webhook_headers: dict[str, str] = Field(
        default_factory=dict, description="Extra headers, e.g. Authorization"
    )
    min_duration_minutes: float = Field(
        15.0, ge=0, description="Alert once an episode has lasted this long"
    )
    kinds: list[str] = Field(
        default_factory=list, description="Anomaly kinds to alert on (empty: all)"
    )
    min_severity: Severity = Field("warning", description="info, warning or critical")
    max_age_hours: float | None = Field(
        24.0,
        ge=0,
        description="Ignore episodes that ended longer ago (history, not news); none: no limit",
    )
    timeout_s: float = Field(10.0, gt=0, description="Seconds to wait for a server")

    @model_validator(mode="after")
    def _has_a_channel(self) -> AlertsSection:
        if self.smtp_host and not self.mail_to:
            raise ValueError("smtp_host without mail_to: no one to mail")
        if not self.channels():
            raise ValueError("give smtp_host with mail_to, or webhook_url")
        if self.smtp_ssl and self.smtp_starttls:
            raise ValueError("smtp_ssl and smtp_starttls exclude each other")
        return self

    def channels(self) -> list[str]:
        out = []
        if self.smtp_host and self.mail_to:
            out.append("email")
        if self.webhook_url:
            out.append("webhook")
        return out

    def password(self) -> str | None:
        if self.smtp_password_env:
            return os.environ.get(self.smtp_password_env)
        return self.smtp_password


class AlertsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    alerts: AlertsSection


def load_alerts_config(path: Path) -> AlertsSection:
    """The `[alerts]` section of a TOML file; InputError naming the file and field if bad."""
    return load_toml(path, AlertsFile, "alerts config file").alerts


@dataclass
class Episode:
    kind: str
    component_kind: str
    component_id: str
    start: datetime
    end: datetime | None
    severity: str
    evidence: dict[str, Any]
    detector: str | None
    duration_s: float

    @property
    def key(self) -> str:
        return episode_key(self.kind, self.component_id, self.start)

    def payload(self) -> dict[str, Any]:
        """The webhook body: the episode as JSON, times in UTC ISO form."""

        def iso(t: datetime | None) -> str | None:
            return None if t is None else t.isoformat() + "Z"

        return {
            "source": "iolens",
            "episode": self.key,
            "kind": self.kind,
            "component_kind": self.component_kind,
            "component_id": self.component_id,
            "start": iso(self.start),
            "end": iso(self.end),
            "ongoing": self.end is None,
            "duration_minutes": round(self.duration_s / 60, 1),
            "severity": self.severity,
            "detector": self.detector,
            "evidence": self.evidence,
        }

    def subject(self) -> str:
        return _subject(self)

    def body(self) -> str:
        return _body(self)


class Alert(Protocol):
    """What the senders need of an alert: an episode here, a job's finding in
    `owner_alerts.py`."""

    @property
    def key(self) -> str: ...

    def payload(self) -> dict[str, Any]: ...

    def subject(self) -> str: ...

    def body(self) -> str: ...


def episode_key(kind: str, component_id: str, start: datetime) -> str:
    """`kind:component:start`, start as ISO UTC to the second, as the alerts table keys it."""
    return f"{kind}:{component_id}:{start.replace(microsecond=0).isoformat()}Z"


@dataclass
class Attempt:
    episode: str
    channel: str
    ok: bool
    detail: str


@dataclass
class CheckResult:
    due: int = 0  # episodes long and severe enough
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return sum(a.ok for a in self.attempts)

    @property
    def failed(self) -> int:
        return sum(not a.ok for a in self.attempts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "sent": self.sent,
            "failed": self.failed,
            "attempts": [a.__dict__ for a in self.attempts],
        }


def due_episodes(store: Store, cfg: AlertsSection, now: datetime) -> list[Episode]:
    """Episodes that should alert at `now` (naive UTC): long, severe and recent enough."""
    sql = (
        'SELECT kind, component_kind, component_id, start, "end", severity, evidence, detector '
        "FROM anomalies WHERE start <= ?"
    )
    params: list[Any] = [now - timedelta(minutes=cfg.min_duration_minutes)]
    if cfg.max_age_hours is not None:
        sql += ' AND ("end" IS NULL OR "end" >= ?)'
        params.append(now - timedelta(hours=cfg.max_age_hours))
    if cfg.kinds:
        sql += f" AND kind IN ({', '.join('?' for _ in cfg.kinds)})"
        params += cfg.kinds
    out = []
    for r in store.query(sql + " ORDER BY start, kind, component_id", params).to_pylist():
        if SEVERITY_RANK.get(r["severity"], -1) < SEVERITY_RANK[cfg.min_severity]:
            continue
        duration = ((r["end"] or now) - r["start"]).total_seconds()
        if duration < cfg.min_duration_minutes * 60:
            continue
        try:
            evidence = json.loads(r["evidence"]) if r["evidence"] else {}
        except ValueError:
            evidence = {"raw": r["evidence"]}
        out.append(
            Episode(
                r["kind"],
                r["component_kind"],
                r["component_id"],
                r["start"],
                r["end"],
                r["severity"],
                evidence,
                r["detector"],
                duration,
            )
        )
    return out


def sent_already(store: Store, keys: list[str]) -> set[tuple[str, str]]:
    """(episode, channel) pairs with a successful send on record."""
    if not keys:
        return set()
    rows = store.query(
        f"SELECT DISTINCT episode, channel FROM alerts WHERE ok "
        f"AND episode IN ({', '.join('?' for _ in keys)})",
        keys,
    ).to_pylist()
    return {(r["episode"], r["channel"]) for r in rows}


def _subject(ep: Episode) -> str:
    state = "ongoing" if ep.end is None else "ended"
    return (
        f"[iolens] {ep.severity}: {ep.kind} on {ep.component_id} "
        f"for {ep.duration_s / 60:.0f} min ({state})"
    )


def _body(ep: Episode) -> str:
    p = ep.payload()
    lines = [
        f"{ep.kind} on {ep.component_kind} {ep.component_id}",
        f"severity: {ep.severity}",
        f"since:    {p['start']}",
        f"until:    {p['end'] or 'ongoing'}",
        f"lasted:   {p['duration_minutes']} min",
        f"detector: {ep.detector or '-'}",
        "",
        "evidence:",
        json.dumps(ep.evidence, indent=2, sort_keys=True),
        "",
        f"episode key: {ep.key}",
        "This episode will not be mailed again; see `iolens` for its history.",
    ]
    return "\n".join(lines) + "\n"


def send_email(cfg: AlertsSection, ep: Alert) -> str:
    """Mail one episode; returns a short detail, raises OSError/SMTPException on failure."""
    msg = EmailMessage()
    msg["Subject"] = ep.subject()
    msg["From"] = cfg.mail_from
    msg["To"] = ", ".join(cfg.mail_to)
    msg["X-Iolens-Episode"] = ep.key
    msg.set_content(ep.body())
    assert cfg.smtp_host is not None
    smtp_cls = smtplib.SMTP_SSL if cfg.smtp_ssl else smtplib.SMTP
    with smtp_cls(cfg.smtp_host, cfg.smtp_port, timeout=cfg.timeout_s) as smtp:
        if cfg.smtp_starttls:
            smtp.starttls(context=ssl.create_default_context())
        if cfg.smtp_user:
            smtp.login(cfg.smtp_user, cfg.password() or "")
        refused = smtp.send_message(msg)
    if refused and len(refused) == len(cfg.mail_to):
        raise smtplib.SMTPRecipientsRefused(refused)
    got = [a for a in cfg.mail_to if a not in refused]
    return f"mailed {', '.join(got)} via {cfg.smtp_host}:{cfg.smtp_port}" + (
        f"; refused {', '.join(refused)}" if refused else ""
    )


def send_webhook(cfg: AlertsSection, ep: Alert) -> str:
    """POST one episode as JSON; a non-2xx answer is a failure (raises httpx.HTTPError)."""
    assert cfg.webhook_url is not None
    res = httpx.post(
        cfg.webhook_url, json=ep.payload(), headers=cfg.webhook_headers, timeout=cfg.timeout_s
    )
    res.raise_for_status()
    return f"HTTP {res.status_code} from {cfg.webhook_url}"


SENDERS: dict[str, Callable[[AlertsSection, Alert], str]] = {
    "email": send_email,
    "webhook": send_webhook,
}


def check_alerts(
    store: Store,
    cfg: AlertsSection,
    now: datetime | None = None,
    guard: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> CheckResult:
    """Send what is due and not sent yet; record every attempt. Never raises for a dead
    server: that is an attempt with ok=false, retried by the next check.

    `guard()` wraps each use of the store (the server passes its writer lock), so a slow
    mail server never holds up ingest.
    """
    now = now or datetime.now(UTC).replace(tzinfo=None)
    with guard():
        due = due_episodes(store, cfg, now)
    result = CheckResult(due=len(due))
    result.attempts = deliver(
        store, [(cfg, ep, channel) for ep in due for channel in cfg.channels()], guard
    )
    return result


def deliver(
    store: Store,
    sends: list[tuple[AlertsSection, Alert, str]],
    guard: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> list[Attempt]:
    """Send each (config, alert, channel) that has no successful send on record, and record
    every attempt: the once-per-channel bookkeeping of admin and owner alerts alike."""
    with guard():
        done = sent_already(store, sorted({a.key for _c, a, _ch in sends}))
    attempts: list[Attempt] = []
    for cfg, alert, channel in sends:
        if (alert.key, channel) in done:
            continue
        try:
            detail, ok = SENDERS[channel](cfg, alert), True
        except (OSError, smtplib.SMTPException, httpx.HTTPError) as exc:
            detail, ok = f"{type(exc).__name__}: {exc}"[:500], False
            log.warning("alert %s for %s failed: %s", channel, alert.key, detail)
        attempts.append(Attempt(alert.key, channel, ok, detail))
    if attempts:
        sent_at = datetime.now(UTC).replace(tzinfo=None)
        rows = [{**a.__dict__, "sent_at": sent_at} for a in attempts]
        with guard():
            store.append("alerts", pa.Table.from_pylist(rows, schema=ALERTS))
    return attempts
