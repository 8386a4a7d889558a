"""Every finding code iolens can emit, from every rule family, with its documentation.

`iolens explain CODE`, the generated docs/findings.md, the HTML report and the UI all
read rule documentation from here, so a new rule file is documented everywhere at once.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

#: (family title, where its rules live, the package exporting RULES or JOB_RULES)
FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("Job rules (traced and simulated jobs)", "src/iolens/analyze/findings/", "findings"),
    ("Zoom-in root causes (Darshan logs)", "src/iolens/analyze/darshan/zoomin/", "zoomin"),
    (
        "Drishti triggers, corrected (Darshan logs)",
        "src/iolens/analyze/darshan/drishti/",
        "drishti",
    ),
    ("Expert rules (Darshan logs)", "src/iolens/analyze/darshan/expert/", "expert"),
)


@dataclass(frozen=True)
class RuleDoc:
    code: str
    name: str
    family: str
    severity: str
    target: str | None
    title: str
    symptom: str
    why: str
    what: str
    #: the rule's evidence thresholds and their sources, for rules that declare them
    thresholds: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _family_rules(key: str) -> list[Any]:
    if key == "findings":
        from iolens.analyze.findings import JOB_RULES

        return list(JOB_RULES)
    if key == "zoomin":
        from iolens.analyze.darshan import zoomin

        return list(zoomin.RULES)
    if key == "expert":
        from iolens.analyze.darshan import expert

        return list(expert.RULES)
    from iolens.analyze.darshan import drishti

    return list(drishti.RULES)


_LABELS = (("Symptom:", "symptom"), ("Why it hurts:", "why"), ("What to do:", "what"))


def _parse(doc: str) -> tuple[str, dict[str, str]]:
    """Split a rule docstring into its title and its Symptom / Why / What parts."""
    doc = inspect.cleandoc(doc)
    title, _, body = doc.partition("\n\n")
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        for label, key in (
            ("Symptom:", "symptom"),
            ("Why it hurts:", "why"),
            ("What to do:", "what"),
        ):
            if line.startswith(label):
                current = parts.setdefault(key, [])
                line = line[len(label) :]
                break
        if current is not None:
            current.append(line.strip())
    return " ".join(title.split()), {k: " ".join(" ".join(v).split()) for k, v in parts.items()}


@cache
def catalog() -> dict[str, RuleDoc]:
    """All rule documentation by code, in family then code order."""
    out: dict[str, RuleDoc] = {}
    for family, _, key in FAMILIES:
        for rule in _family_rules(key):
            cls = rule if isinstance(rule, type) else type(rule)
            title, parts = _parse(cls.__doc__ or cls.name)
            out[cls.code] = RuleDoc(
                code=cls.code,
                name=cls.name,
                family=family,
                severity=cls.severity,
                target=getattr(cls, "target", None),
                title=title,
                symptom=parts.get("symptom", ""),
                why=parts.get("why", ""),
                what=parts.get("what", ""),
                thresholds=cls.threshold_doc() if hasattr(cls, "threshold_doc") else "",
            )
    return out


def titles(families: tuple[str, ...] | None = None) -> dict[str, str]:
    """Each code's one-line summary; only the rules of `families` (keys of `FAMILIES`:
    "findings", "zoomin", "drishti", "expert") when given, which imports no other family
    (`iolens darshan` names Darshan findings only: not the job rules' modules)."""
    if families is None:
        return {code: doc.title for code, doc in catalog().items()}
    out = {}
    for _, _, key in FAMILIES:
        if key in families:
            for rule in _family_rules(key):
                cls = rule if isinstance(rule, type) else type(rule)
                out[cls.code] = _parse(cls.__doc__ or cls.name)[0]
    return out
