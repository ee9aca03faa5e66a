"""Contract versions and the upcasters between them (DESIGN decision 4).

| version | what it has |
|---|---|
| 1.0 | scores, lanes, signals, confidence, flags; no telemetry, integrity |
|     | adjustments, status or completed lanes; judge_completed_at optional |
| 2.0 | adds telemetry (without error_count and telemetry_unavailable_reason), |
|     | integrity adjustments, status, completed lanes                     |
| 2.1 | seed 000's contract |

Human reviews: 1.0 is seed 003's; 1.1 adds the review desk's optional fields.

Upcasters are additive and explicit: each fills only fields the old version
could not have had, with a documented default, and never mutates its input.
An unknown minor of a known major is read as the newest known minor of that
major (its extra fields stay in the raw event); an unknown major is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from schemas.errors import ContractError

Doc = dict[str, Any]
_VERSION_RE = re.compile(r"([0-9]+)\.([0-9]+)")  # ASCII digits, whole string (fullmatch)

ADDED_IN_2_0 = ("telemetry_summary", "integrity_adjustments", "integrity_adjusted_score", "status",
                "failure_reason", "completed_lane_keys")  # fmt: skip
TELEMETRY_ADDED_IN_2_1 = ("error_count", "telemetry_unavailable_reason")
TELEMETRY_BEFORE_2_0 = "telemetry not recorded: schema 1.0 predates telemetry"
TELEMETRY_NOT_REPORTED_2_0 = "telemetry not reported by a schema 2.0 producer"
_METRICS = ("tool_call_count", "step_count", "error_rate", "total_tokens_used", "wall_time_seconds")


def judge_output_1_0_to_2_0(doc: Doc) -> Doc:
    out = dict(doc)
    lanes = out.get("lane_scores")
    out.setdefault("telemetry_summary", {m: None for m in _METRICS})
    out.setdefault("integrity_adjustments", [])
    # 1.0 had no deductions, so the adjusted score is the overall score.
    out.setdefault("integrity_adjusted_score", out.get("overall_score"))
    out.setdefault("status", "complete")
    out.setdefault("failure_reason", None)
    # 1.0 producers could leave the completion time out; it is nullable since.
    out.setdefault("judge_completed_at", None)
    if isinstance(lanes, list):
        out.setdefault(
            "completed_lane_keys",
            [lane.get("lane_key") for lane in lanes if isinstance(lane, dict)],
        )
    out["schema_version"] = "2.0"
    out["_upcast_telemetry_reason"] = TELEMETRY_BEFORE_2_0
    return out


def judge_output_2_0_to_2_1(doc: Doc) -> Doc:
    out = dict(doc)
    reason = out.pop("_upcast_telemetry_reason", TELEMETRY_NOT_REPORTED_2_0)
    telemetry = out.get("telemetry_summary")
    if isinstance(telemetry, dict):
        telemetry = dict(telemetry)
        telemetry.setdefault("error_count", None)
        if "telemetry_unavailable_reason" not in telemetry:
            reported = any(telemetry.get(m) is not None for m in _METRICS)
            telemetry["telemetry_unavailable_reason"] = None if reported else reason
        out["telemetry_summary"] = telemetry
    out["schema_version"] = "2.1"
    return out


class VersionLine:
    """The known versions of one contract and how to climb from each to the current one."""

    def __init__(self, name: str, steps: dict[str, Callable[[Doc], Doc] | None]):
        # steps: version -> upcaster to the next version (None for the current one)
        self.name = name
        self.steps = steps
        self.current = next(v for v, step in steps.items() if step is None)
        self.known = sorted(steps, key=_key)

    def resolve(self, doc: Doc) -> tuple[str, str]:
        """(version as sent, known version it is read as), or ContractError."""
        if "schema_version" not in doc or doc["schema_version"] is None:
            raise ContractError.single(
                "MISSING_SCHEMA_VERSION", "every event needs schema_version", ("schema_version",)
            )
        sent = doc["schema_version"]
        if not isinstance(sent, str) or not _VERSION_RE.fullmatch(sent):
            raise ContractError.single(
                "INVALID_SCHEMA_VERSION",
                'schema_version must be a "major.minor" string such as "2.1"',
                ("schema_version",),
            )
        major, _ = _key(sent)
        same_major = [v for v in self.known if _key(v)[0] == major]
        if not same_major:
            raise ContractError.single(
                "UNSUPPORTED_SCHEMA_VERSION",
                f"{self.name} major version {major} is not supported (known: {', '.join(self.known)})",
                ("schema_version",),
            )
        older = [v for v in same_major if _key(v) <= _key(sent)]
        return sent, (older[-1] if older else same_major[0])

    def upcast(self, doc: Doc) -> tuple[str, Doc]:
        sent, version = self.resolve(doc)
        out = dict(doc)
        out["schema_version"] = version
        while (step := self.steps[version]) is not None:
            out = step(out)
            version = out["schema_version"]
        out.pop("_upcast_telemetry_reason", None)
        return sent, out


def _key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


JUDGE_OUTPUT_VERSIONS = VersionLine(
    "judge output",
    {"1.0": judge_output_1_0_to_2_0, "2.0": judge_output_2_0_to_2_1, "2.1": None},
)
CLAIM_CHECK_VERSIONS = VersionLine("claim check", {"1.0": None})


def human_review_1_0_to_1_1(doc: Doc) -> Doc:
    """1.1's fields are all optional: a 1.0 review has none of them (null)."""
    out = dict(doc)
    for name in ("review_seconds", "blind_verdict", "source", "lease_id"):
        out.setdefault(name, None)
    out["schema_version"] = "1.1"
    return out


HUMAN_REVIEW_VERSIONS = VersionLine("human review", {"1.0": human_review_1_0_to_1_1, "1.1": None})
