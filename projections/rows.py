"""Kafka records -> read-model rows. Pure: no database, no Kafka client.

Every id is deterministic, every timestamp comes from the event or its Kafka
record, so projecting the same topics twice, or rebuilding from scratch,
writes the very same rows. A judge output's id is the uuid5 of its
judge_run_id; its child rows' ids are that id with the last 48 bits (the
uuid's node field) replaced by the child's kind and position (`child_id`):
one integer operation instead of a SHA-1 per row. Ids written before this
scheme (uuid5 of parent id, kind and key) stay valid; `judgeflow rebuild`
rewrites a schema with the current ids throughout.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from schemas import (
    ClaimCheck,
    ContractError,
    HumanReview,
    InvalidEvent,
    JudgeOutput,
    ReconciliationRevision,
    RoutingDecision,
    RunReview,
    StaleWorkAlert,
    parse_evaluation_run,
    parse_review,
    parse_rubric,
)
from schemas.decoding import MAX_PAYLOAD_BYTES
from schemas.drift import JudgeDriftAlert
from schemas.judge_output import EvidenceRef
from streams.edge import H_SOURCE, H_SOURCE_VERSION, H_WARNINGS, SourceRef, dead_letter, require_key
from streams.topics import INPUT_ROLES, TopicNames

ROW_NS = uuid.UUID("5b8f0c1e-7a2d-5f3e-9c41-2d6e8a0b4f17")


def row_id(*parts: object) -> str:
    return str(uuid.uuid5(ROW_NS, "/".join(str(p) for p in parts)))


LANE, DIMENSION, DIMENSION_REF, FLAG, FLAG_REF, ADJUSTMENT, ADJUSTMENT_REF, TELEMETRY, WARNING = range(1, 10)
_TOP = ~((1 << 48) - 1)


def child_id(parent: uuid.UUID, kind: int, a: int = 0, b: int = 0, c: int = 0) -> uuid.UUID:
    """A child row's id: the judge output's id with its node field set to
    kind (4 bits), a (12 bits), b and c (16 bits each). The version and
    variant bits are the parent's, so it is still a valid version-5 uuid;
    positions past those widths (never seen) fall back to a uuid5."""
    if a < 4096 and b < 65536 and c < 65536:
        return uuid.UUID(int=(parent.int & _TOP) | (kind << 44) | (a << 32) | (b << 16) | c)
    return uuid.uuid5(ROW_NS, f"{parent}/{kind}/{a}/{b}/{c}")


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int

    @property
    def at(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_ms / 1000, UTC)


@dataclass
class Rows:
    """Rows per table for one batch, plus the keys whose derived rows need refreshing."""

    tables: dict[str, list[tuple[Any, ...]]] = field(default_factory=lambda: defaultdict(list))
    claims: set[str] = field(default_factory=set)
    runs: set[str] = field(default_factory=set)
    review_runs: set[str] = field(default_factory=set)
    """Runs whose review item may have changed: routed to human review, or reviewed, in this batch."""
    outputs: set[uuid.UUID] = field(default_factory=set)
    """Judge outputs in this batch: a second copy (an upstream retry) adds no rows."""
    owners: dict[str, list[uuid.UUID]] = field(default_factory=lambda: defaultdict(list))
    """For the tables in `OWNED`: the judge output each row belongs to, row by row.
    The store writes a child row only when its judge output row is new."""

    def add(self, table: str, row: tuple[Any, ...]) -> None:
        self.tables[table].append(row)

    def add_child(self, table: str, owner: uuid.UUID, row: tuple[Any, ...]) -> None:
        self.tables[table].append(row)
        self.owners[table].append(owner)

    def count(self) -> int:
        return sum(len(rows) for rows in self.tables.values())


OWNED = (
    "judge_lane_scores",
    "judge_dimension_scores",
    "judge_flags",
    "judge_integrity_adjustments",
    "judge_evidence_refs",
    "judge_telemetry",
    "judge_output_warnings",
)


def _json_or_none(value: bytes | None) -> str | None:
    """The event's own text when it decodes as a JSON object jsonb can hold, else None.

    One orjson pass checks it (NaN, infinities and lone surrogates are refused,
    as Postgres refuses them); the text itself goes to Postgres, not a re-encoding."""
    if value is None or len(value) > MAX_PAYLOAD_BYTES or b"\\u0000" in value:  # jsonb cannot hold NUL
        return None
    try:
        if not isinstance(orjson.loads(value), dict):
            return None
        return value.decode()
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        return None


def _placeholders(rows: Rows, at: datetime, *, run: str, submission: str, rubric: str) -> None:
    rows.add("submission_seen", (submission, at))
    rows.add("rubric_seen", (rubric, at))
    rows.add("run_seen", (run, at))


def project(record: Record, names: TopicNames, roles: dict[str, str], rows: Rows) -> None:
    """Add the rows one record produces to `rows`."""
    role = roles.get(record.topic)
    if role is None:
        return
    at = record.at
    if role in INPUT_ROLES:
        rows.add("raw_events", raw_event_row(record))
        _input(record, role, rows, at)
    elif role == "judge_outputs_valid" and record.value is not None:
        _judge_output(record, rows, at)
    elif role == "checks_valid" and record.value is not None:
        c = ClaimCheck.model_validate_json(record.value)
        rows.add(
            "claim_checks",
            (
                c.claim_id,
                c.judge_id,
                c.source_id,
                c.verdict,
                c.score,
                c.confidence,
                c.reason,
                c.passage_quote,
                c.passage,
                c.claim_text,
                c.rubric_version_id,
                c.schema_version,
                c.checked_at,
                record.partition,
                record.offset,
                at,
            ),
        )
        rows.claims.add(c.claim_id)
    elif role == "invalid" and record.value is not None:
        _invalid(InvalidEvent.model_validate_json(record.value), rows)
    elif role == "reconciled" and record.value is not None:
        _revision(ReconciliationRevision.model_validate_json(record.value), rows, at)
    elif role in ("done", "second_judge", "human_review") and record.value is not None:
        d = RoutingDecision.model_validate_json(record.value)
        rows.add(
            "routing_decisions",
            (
                d.event_id,
                d.subject,
                d.claim_id,
                d.evaluation_run_id,
                d.route,
                d.reason,
                d.verdict,
                d.score,
                d.confidence,
                d.judge_ids,
                d.input_ids,
                d.policy.model_dump_json() if d.policy else None,
                d.aggregation_mode,
                d.tie_rule,
                d.agreement,
                d.decided_at,
            ),
        )
        if d.claim_id is not None:
            rows.claims.add(d.claim_id)
        elif d.evaluation_run_id is not None and d.route == "human_review":
            rows.review_runs.add(d.evaluation_run_id)
    elif role == "alerts" and record.value is not None:
        rows.add("stale_alerts", stale_alert_row(record, StaleWorkAlert.model_validate_json(record.value)))
    elif role == "judge_alerts" and record.value is not None:
        rows.add("judge_alerts", judge_alert_row(record, JudgeDriftAlert.model_validate_json(record.value)))


def raw_event_row(record: Record) -> tuple[Any, ...]:
    """One `raw_events` row: the input record exactly as received."""
    headers = json.dumps([[k, base64.b64encode(v).decode()] for k, v in record.headers])
    return (
        record.topic,
        record.partition,
        record.offset,
        record.key,
        headers,
        record.value,
        _json_or_none(record.value),
        record.at,
    )


PROJECTION_REFUSED = "PROJECTION_REFUSED"
"""Postgres refused a record's rows (a data, constraint or size error on that record, not an outage)."""
PROJECTION_UNDECODABLE = "PROJECTION_UNDECODABLE"
"""The projector could not turn a record into rows (it does not hold what its topic carries)."""


def reject_row(record: Record, code: str, error: str, sqlstate: str | None = None) -> tuple[Any, ...]:
    """One `projection_rejects` row: where the record is, its bytes, and why it was set aside."""
    stage = "write" if code == PROJECTION_REFUSED else "decode"
    first_line = (error.strip().splitlines() or [""])[0][:1000] or type(error).__name__
    return (
        record.topic,
        record.partition,
        record.offset,
        record.key,
        record.value,
        stage,
        code,
        sqlstate,
        first_line,
        record.at,
    )


def stale_alert_row(record: Record, a: StaleWorkAlert) -> tuple[Any, ...]:
    """One `stale_alerts` row: the alert as published, and where it was read (the first copy wins)."""
    return (
        a.event_id,
        a.kind,
        a.subject,
        a.subject_id,
        a.waiting_for,
        a.rubric_version_id,
        a.held_events,
        a.first_seen_at,
        a.deadline,
        a.reason,
        a.raised_at,
        a.schema_version,
        record.topic,
        record.partition,
        record.offset,
        record.at,
    )


def judge_alert_row(record: Record, a: JudgeDriftAlert) -> tuple[Any, ...]:
    """One `judge_alerts` row: the drift alert as published, and where it was read (the first copy wins)."""
    return (
        a.event_id,
        a.judge,
        a.source,
        a.statistic,
        a.lane,
        a.window_seconds,
        a.window_start,
        a.window_end,
        a.value,
        a.n,
        a.baseline_mean,
        a.baseline_sd,
        a.baseline_windows,
        a.baseline_n,
        a.z,
        a.z_threshold,
        a.min_delta,
        a.direction,
        a.raised_at,
        a.schema_version,
        record.topic,
        record.partition,
        record.offset,
        record.at,
    )


def _input(record: Record, role: str, rows: Rows, at: datetime) -> None:
    """Catalog rows straight from the input topics; invalid ones become dead letters."""
    if record.value is None or role in ("judge_outputs", "checks"):
        return  # judge outputs and checks are projected from the validated topics
    src = SourceRef(record.topic, record.partition, record.offset, record.key)
    try:
        if role == "rubrics":
            r = parse_rubric(record.value)
            require_key(record.key, r.rubric_version_id, "rubric_version_id")
            rows.add(
                "rubrics",
                (r.rubric_version_id, r.name, r.schema_version, r.model_dump_json(), r.created_at, at, record.offset),
            )
        elif role == "runs":
            run = parse_evaluation_run(record.value)
            require_key(record.key, run.evaluation_run_id, "evaluation_run_id")
            rows.add("submission_seen", (run.submission_id, at))
            rows.add("rubric_seen", (run.rubric_version_id, at))
            rows.add(
                "evaluation_runs",
                (
                    run.evaluation_run_id,
                    run.submission_id,
                    run.rubric_version_id,
                    run.expected_judge_models,
                    run.judge_timeout_seconds,
                    run.schema_version,
                    run.started_at,
                    at,
                    record.offset,
                ),
            )
        elif role == "reviews":
            _review(parse_review(record.value), record.value, rows)
    except ContractError as err:
        contract = {"rubrics": "rubric", "runs": "evaluation_run", "reviews": "review"}[role]
        _invalid(
            InvalidEvent.model_validate_json(
                dead_letter(record.value, src, contract, err, received_at=at.isoformat()).value
            ),
            rows,
        )


def _review(rv: HumanReview | RunReview, raw: Any, rows: Rows) -> None:
    """A claim's review or a run's, and the review item it may close."""
    if isinstance(rv, RunReview):
        rows.add("run_reviews", run_review_row(rv))
        rows.review_runs.add(rv.evaluation_run_id)
        return
    seed = (rv.review_id, rv.claim_id, rv.reviewer, rv.final_verdict, rv.notes, rv.created_at)
    desk = (rv.review_seconds, rv.blind_verdict, rv.source, rv.lease_id)
    rows.add("reviews", (*seed, json.loads(raw)["schema_version"], *desk))
    rows.claims.add(rv.claim_id)


def run_review_row(rv: RunReview) -> tuple[Any, ...]:
    blind = None if rv.blind_lane_scores is None else json.dumps(rv.blind_lane_scores)
    return (
        rv.review_id,
        rv.evaluation_run_id,
        rv.reviewer,
        rv.final_overall_score,
        json.dumps(rv.lane_scores),
        rv.notes,
        rv.created_at,
        rv.schema_version,
        rv.review_seconds,
        rv.blind_overall_score,
        blind,
        rv.source,
        rv.lease_id,
    )


def _invalid(ev: InvalidEvent, rows: Rows) -> None:
    rows.add(
        "invalid_events",
        (
            ev.event_id,
            ev.contract,
            ev.source_topic,
            ev.source_partition,
            ev.source_offset,
            base64.b64decode(ev.source_key_b64) if ev.source_key_b64 else None,
            ev.error_codes,
            json.dumps(ev.errors),
            base64.b64decode(ev.original_b64),
            ev.original_size,
            ev.original_sha256,
            ev.original_truncated,
            ev.received_at,
        ),
    )


def _judge_output(record: Record, rows: Rows, at: datetime) -> None:
    """A validated judge output: its row, then its children (only the first copy in a batch adds rows)."""
    o = JudgeOutput.model_validate_json(record.value or b"")
    headers = dict(record.headers)
    _placeholders(rows, at, run=o.evaluation_run_id, submission=o.submission_id, rubric=o.rubric_version_id)
    oid = uuid.uuid5(ROW_NS, f"judge_output/{o.judge_run_id}")
    if oid in rows.outputs:
        return
    rows.outputs.add(oid)
    rows.add("judge_outputs", _output_row(o, oid, record, headers, at))
    _lane_rows(o, oid, rows, at)
    _flag_and_adjustment_rows(o, oid, rows, at)
    t = o.telemetry_summary
    telemetry = (
        t.tool_call_count,
        t.step_count,
        t.error_count,
        t.error_rate,
        t.total_tokens_used,
        t.wall_time_seconds,
        t.telemetry_unavailable_reason,
    )
    rows.add_child("judge_telemetry", oid, (child_id(oid, TELEMETRY), oid, *telemetry))
    for i, w in enumerate(json.loads(headers.get(H_WARNINGS, b"[]"))):
        rows.add_child(
            "judge_output_warnings", oid, (child_id(oid, WARNING, i), oid, w["code"], w["loc"], w["message"])
        )


def _output_row(
    o: JudgeOutput, oid: uuid.UUID, record: Record, headers: dict[str, bytes], at: datetime
) -> tuple[Any, ...]:
    """The `judge_outputs` row: the output's fields, the version its producer sent, where its raw event is."""
    src_topic, src_partition, src_offset = _coordinates(headers.get(H_SOURCE, b"").decode(), record)
    source_version = headers.get(H_SOURCE_VERSION, o.schema_version.encode()).decode()
    return (
        oid,
        o.evaluation_run_id,
        o.submission_id,
        o.rubric_version_id,
        o.judge_run_id,
        o.judge_model,
        o.schema_version,
        source_version,
        o.overall_score,
        o.integrity_adjusted_score,
        o.positive_signal,
        o.primary_weakness,
        o.confidence,
        o.confidence_reasoning,
        o.status,
        o.failure_reason,
        o.completed_lane_keys,
        o.judge_started_at,
        o.judge_completed_at,
        src_topic,
        src_partition,
        src_offset,
        at,
    )


def _ref_row(
    ref_id: uuid.UUID,
    oid: uuid.UUID,
    parent_type: str,
    parent: uuid.UUID,
    position: int,
    ref: EvidenceRef,
    at: datetime,
) -> tuple[Any, ...]:
    """A `judge_evidence_refs` row: the parent's id, and again in the column of its kind."""
    dimension, adjustment, flag = (parent if parent_type == kind else None for kind in _REF_PARENTS)
    return (
        ref_id,
        oid,
        parent_type,
        parent,
        dimension,
        adjustment,
        flag,
        position,
        ref.type,
        ref.id,
        ref.location,
        ref.excerpt,
        at,
    )


_REF_PARENTS = ("dimension_score", "integrity_adjustment", "flag")


def _lane_rows(o: JudgeOutput, oid: uuid.UUID, rows: Rows, at: datetime) -> None:
    add = rows.add_child
    for li, lane in enumerate(o.lane_scores):
        lid = child_id(oid, LANE, li)
        add("judge_lane_scores", oid, (lid, oid, lane.lane_key, lane.lane_score))
        for di, dim in enumerate(lane.dimension_scores):
            did = child_id(oid, DIMENSION, li, di)
            add("judge_dimension_scores", oid, (did, lid, dim.dimension_key, dim.score, dim.reasoning, dim.band_label))
            for i, ref in enumerate(dim.evidence_refs):
                add(
                    "judge_evidence_refs",
                    oid,
                    _ref_row(child_id(oid, DIMENSION_REF, li, di, i), oid, "dimension_score", did, i, ref, at),
                )


def _flag_and_adjustment_rows(o: JudgeOutput, oid: uuid.UUID, rows: Rows, at: datetime) -> None:
    add = rows.add_child
    for i, flag in enumerate(o.flags):
        fid = child_id(oid, FLAG, i)
        add(
            "judge_flags", oid, (fid, oid, i, flag.flag_code, flag.severity, flag.description, flag.auto_disqualify, at)
        )
        for j, ref in enumerate(flag.evidence_refs or []):
            add("judge_evidence_refs", oid, _ref_row(child_id(oid, FLAG_REF, i, j), oid, "flag", fid, j, ref, at))
    for i, adj in enumerate(o.integrity_adjustments):
        aid = child_id(oid, ADJUSTMENT, i)
        add("judge_integrity_adjustments", oid, (aid, oid, i, adj.flag_code, adj.description, adj.deduction, at))
        for j, ref in enumerate(adj.evidence_refs):
            add(
                "judge_evidence_refs",
                oid,
                _ref_row(child_id(oid, ADJUSTMENT_REF, i, j), oid, "integrity_adjustment", aid, j, ref, at),
            )


def _coordinates(coordinates: str, record: Record) -> tuple[str, int, int]:
    src = SourceRef.parse(coordinates)
    if src.partition < 0:
        return record.topic, record.partition, record.offset
    return src.topic, src.partition, src.offset


def _revision(rev: ReconciliationRevision, rows: Rows, at: datetime) -> None:
    r = rev.result
    rows.add("submission_seen", (rev.submission_id, at))
    rows.add("rubric_seen", (rev.rubric_version_id, at))
    rows.add("run_seen", (rev.evaluation_run_id, at))
    rows.add(
        "evaluation_reconciled_revisions",
        (
            rev.event_id,
            rev.evaluation_run_id,
            rev.submission_id,
            rev.revision,
            rev.status,
            rev.final_reason,
            r.judge_count,
            r.successful_judge_count,
            r.final_overall_score,
            r.final_adjusted_score,
            r.weighted_final_score,
            r.method,
            r.has_contradictions,
            json.dumps([c.model_dump() for c in r.contradiction_details]),
            json.dumps(r.reconciled_lane_scores),
            json.dumps(r.lane_scores_by_judge),
            rev.judge_run_ids,
            r.missing_judges,
            r.failed_judges,
            r.notice,
            rev.emitted_at,
        ),
    )
    rows.runs.add(rev.evaluation_run_id)
