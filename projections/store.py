"""Write one batch of rows in one transaction, with the consumed offsets.

Inserts go in parent-before-child order and are idempotent, so a redelivered
or replayed record changes nothing:

- tables keyed by an event identity skip conflicts (`ON CONFLICT DO NOTHING`):
  a batch is COPYed straight into its table inside a savepoint, and only when a
  row of it exists already, staged and inserted with one INSERT ... SELECT;
- a judge output's child rows (lanes, dimensions, evidence, flags, ...) go
  straight into their tables with a binary COPY, and only for the outputs
  whose own row this transaction inserted (`RETURNING`): an output seen before
  already has every child row, written in the transaction that wrote it;
- the "seen" placeholders and the catalog upserts are sent in one pipeline.

The derived one-row-per-key tables (`checks`, `evaluation_reconciled_scores`)
are recomputed from the stored facts for the keys a batch touched, so they
do not depend on the order records arrive in; a transaction-scoped advisory
lock per key makes two projectors (different partitions, one key) refresh
one after the other, the second seeing the first's facts. The rubrics whose
judge agreement the batch changed are marked for the projector's refresh
after the commit (`projections.agreement_store`).
"""

from __future__ import annotations

import time
import weakref
import zlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from projections.agreement_store import mark_pending, touched
from projections.review_items import DEFAULT_SAMPLE, ReviewSample, refresh_review_items, refresh_run_review_items
from projections.rows import OWNED, Rows

INSERTS: dict[str, str] = {
    "raw_events": """INSERT INTO raw_events (topic, partition, "offset", key, headers, value, value_json,
        received_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "submission_seen": """INSERT INTO submissions (id, first_seen_at) VALUES (%s, %s)
        ON CONFLICT (id) DO UPDATE SET first_seen_at = least(submissions.first_seen_at, EXCLUDED.first_seen_at)""",
    "rubric_seen": """INSERT INTO rubrics (id, first_seen_at) VALUES (%s, %s)
        ON CONFLICT (id) DO UPDATE SET first_seen_at = least(rubrics.first_seen_at, EXCLUDED.first_seen_at)""",
    "rubrics": """INSERT INTO rubrics (id, name, schema_version, doc, created_at, first_seen_at, source_offset)
        VALUES (%s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, schema_version = EXCLUDED.schema_version,
          doc = EXCLUDED.doc, created_at = EXCLUDED.created_at, source_offset = EXCLUDED.source_offset,
          first_seen_at = least(rubrics.first_seen_at, EXCLUDED.first_seen_at)
        WHERE rubrics.source_offset IS NULL OR rubrics.source_offset < EXCLUDED.source_offset""",
    "run_seen": """INSERT INTO evaluation_runs (id, first_seen_at) VALUES (%s, %s)
        ON CONFLICT (id) DO UPDATE SET
          first_seen_at = least(evaluation_runs.first_seen_at, EXCLUDED.first_seen_at)""",
    "evaluation_runs": """INSERT INTO evaluation_runs (id, submission_id, rubric_version_id, expected_judge_models,
          judge_timeout_seconds, schema_version, started_at, first_seen_at, source_offset)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (id) DO UPDATE SET submission_id = EXCLUDED.submission_id,
          rubric_version_id = EXCLUDED.rubric_version_id, expected_judge_models = EXCLUDED.expected_judge_models,
          judge_timeout_seconds = EXCLUDED.judge_timeout_seconds, schema_version = EXCLUDED.schema_version,
          started_at = EXCLUDED.started_at, source_offset = EXCLUDED.source_offset,
          first_seen_at = least(evaluation_runs.first_seen_at, EXCLUDED.first_seen_at)
        WHERE evaluation_runs.source_offset IS NULL OR evaluation_runs.source_offset > EXCLUDED.source_offset""",
    "judge_outputs": """INSERT INTO judge_outputs (id, evaluation_run_id, submission_id, rubric_version_id,
          judge_run_id, judge_model, schema_version, source_schema_version, overall_score,
          integrity_adjusted_score, positive_signal, primary_weakness, confidence, confidence_reasoning, status,
          failure_reason, completed_lane_keys, judge_started_at, judge_completed_at, source_topic,
          source_partition, source_offset, created_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT DO NOTHING""",
    "judge_lane_scores": """INSERT INTO judge_lane_scores (id, judge_output_id, lane_key, lane_score)
        VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "judge_dimension_scores": """INSERT INTO judge_dimension_scores (id, lane_score_id, dimension_key, score,
        reasoning, band_label) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "judge_flags": """INSERT INTO judge_flags (id, judge_output_id, position, flag_code, severity, description,
        auto_disqualify, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "judge_integrity_adjustments": """INSERT INTO judge_integrity_adjustments (id, judge_output_id, position,
        flag_code, description, deduction, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "judge_evidence_refs": """INSERT INTO judge_evidence_refs (id, judge_output_id, parent_type, parent_id,
          dimension_score_id, adjustment_id, flag_id, position, ref_type, ref_id, ref_location, excerpt, created_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "judge_telemetry": """INSERT INTO judge_telemetry (id, judge_output_id, tool_call_count, step_count,
          error_count, error_rate, total_tokens_used, wall_time_seconds, telemetry_unavailable_reason)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "judge_output_warnings": """INSERT INTO judge_output_warnings (id, judge_output_id, code, loc, message)
        VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "evaluation_reconciled_revisions": """INSERT INTO evaluation_reconciled_revisions (event_id,
          evaluation_run_id, submission_id, revision, status, final_reason, judge_count, successful_judge_count,
          final_overall_score, final_adjusted_score, weighted_final_score, reconciliation_method,
          has_contradictions, contradiction_details, reconciled_lane_scores, lane_scores_by_judge, judge_run_ids,
          missing_judges, failed_judges, notice, emitted_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT DO NOTHING""",
    "claim_checks": """INSERT INTO claim_checks (claim_id, judge_id, source_id, verdict, score, confidence,
          reason, passage_quote, passage, claim_text, rubric_version_id, schema_version, checked_at,
          source_partition, source_offset, created_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "reviews": """INSERT INTO reviews (review_id, claim_id, reviewer, final_verdict, notes, created_at,
          schema_version, review_seconds, blind_verdict, source, lease_id)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "run_reviews": """INSERT INTO run_reviews (review_id, evaluation_run_id, reviewer, final_overall_score,
          lane_scores, notes, created_at, schema_version, review_seconds, blind_overall_score, blind_lane_scores,
          source, lease_id)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "routing_decisions": """INSERT INTO routing_decisions (event_id, subject, claim_id, evaluation_run_id, route,
          reason, verdict, score, confidence, judge_ids, input_ids, policy, aggregation_mode, tie_rule,
          agreement, decided_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "invalid_events": """INSERT INTO invalid_events (event_id, contract, source_topic, source_partition,
          source_offset, source_key, error_codes, errors, original, original_size, original_sha256,
          original_truncated, received_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "stale_alerts": """INSERT INTO stale_alerts (event_id, kind, subject, subject_id, waiting_for, rubric_version_id,
          held_events, first_seen_at, deadline, reason, raised_at, schema_version, source_topic, source_partition,
          source_offset, created_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
    "judge_alerts": """INSERT INTO judge_alerts (event_id, judge, source, statistic, lane, window_seconds, window_start,
          window_end, value, n, baseline_mean, baseline_sd, baseline_windows, baseline_n, z, z_threshold, min_delta,
          direction, raised_at, schema_version, source_topic, source_partition, source_offset, created_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT DO NOTHING""",
    "projection_rejects": """INSERT INTO projection_rejects (topic, partition, "offset", key, value, stage, code,
          sqlstate, error, received_at)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
}
ORDER = list(INSERTS)  # parents before children

REFUSING_SQLSTATE_CLASSES = ("22", "23", "54")
"""Postgres error classes that refuse the data itself (data exception, integrity constraint
violation, program limit exceeded: a value too large for an index): the same rows fail
every time, so retrying the batch as it is would stall the projection forever."""


def refused_by_data(exc: BaseException) -> bool:
    """Whether Postgres refused a batch for what one of its rows holds (never an outage:
    a lost connection, a server shutting down or a deadlock is retried, not set aside)."""
    state = getattr(exc, "sqlstate", None)
    return isinstance(exc, psycopg.Error) and isinstance(state, str) and state[:2] in REFUSING_SQLSTATE_CLASSES


COPY_MIN_ROWS = 20
"""From this many rows on, an idempotent insert goes through COPY into a
temporary staging table and one INSERT ... SELECT: the server then parses and
plans one statement per table and batch instead of one per row (it cannot
reuse plans: the projector keeps no prepared statements, see `Projector`)."""


def _columns(insert: str) -> tuple[str, str]:
    head = insert.split("VALUES", 1)[0]
    table = head.split("INSERT INTO", 1)[1].split("(", 1)[0].strip()
    return table, head.split("(", 1)[1].rsplit(")", 1)[0]


STAGED: dict[str, tuple[str, str]] = {
    name: _columns(sql) for name, sql in INSERTS.items() if sql.rstrip().endswith("ON CONFLICT DO NOTHING")
}
"""Tables whose insert only ever skips conflicts: (target table, column list)."""


STAGED_BINARY: dict[str, list[str]] = {
    "raw_events": ["text", "int4", "int8", "bytea", "jsonb", "bytea", "jsonb", "timestamptz"],
}
"""Staged tables COPYed in binary (column types in `INSERTS` order): a raw event's
value goes as its bytes, not hex-encoded to twice its size and decoded again by
the server. Their jsonb columns hold JSON text already (the event's own text)."""


def _as_is(text: str) -> str:
    """The jsonb text as it is: checked when the row was made, never re-encoded."""
    return text


_STAGES: weakref.WeakKeyDictionary[psycopg.Connection, set[str]] = weakref.WeakKeyDictionary()
"""The staging tables each connection has created: a temporary table lasts as long as its session, so
it is created once per connection, not once per batch (a round trip per staged table and batch). A
transaction that fails forgets its connection's tables: one created inside it was rolled back with it."""


def _insert(cur: psycopg.Cursor, name: str, batch: list[tuple[object, ...]], *, returning: bool = False) -> set[Any]:
    """Insert skipping conflicts; with `returning`, the ids (first column) of the rows inserted.

    A batch of COPY size first goes straight into its table, inside a savepoint: in steady
    state no row of it exists yet, and one COPY is all the work. Only if some row conflicts
    (a redelivered or replayed record, a duplicate within the batch) is the savepoint rolled
    back and the batch staged, to skip the conflicting rows with one INSERT ... SELECT."""
    staged = STAGED.get(name)
    if staged is None or (len(batch) < COPY_MIN_ROWS and not returning):
        cur.executemany(INSERTS[name], batch)
        return set()
    try:
        with cur.connection.transaction():
            _copy(cur, name, staged[0], batch)
        return {row[0] for row in batch} if returning else set()
    except psycopg.errors.UniqueViolation:
        pass
    table, cols = staged
    stage = f"stage_{table}"
    made = _STAGES.setdefault(cur.connection, set())
    if stage not in made:
        cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {stage} (LIKE {table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS")
        made.add(stage)
    _copy(cur, name, stage, batch)
    insert = f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {stage} ON CONFLICT DO NOTHING"
    if not returning:
        cur.execute(insert)
        return set()
    cur.execute(insert + " RETURNING id")
    return {row[0] for row in cur.fetchall()}


def _copy(cur: psycopg.Cursor, name: str, into: str, rows: list[tuple[Any, ...]]) -> None:
    """COPY rows of `name` into `into` (its table or its staging table); in binary
    where the column types are known (`STAGED_BINARY`, `BINARY_TYPES`)."""
    cols = STAGED[name][1]
    types = STAGED_BINARY.get(name) or BINARY_TYPES.get(name)
    jsonb = [i for i, t in enumerate(types or ()) if t == "jsonb"]
    with cur.copy(f"COPY {into} ({cols}) FROM STDIN" + (" (FORMAT BINARY)" if types else "")) as copy:
        if types:
            copy.set_types(types)
        for row in rows:
            if jsonb:
                values = list(row)
                for i in jsonb:
                    if values[i] is not None:
                        values[i] = Jsonb(values[i], dumps=_as_is)
                row = tuple(values)
            copy.write_row(row)


BINARY_TYPES: dict[str, list[str]] = {
    "judge_lane_scores": ["uuid", "uuid", "text", "int4"],
    "judge_dimension_scores": ["uuid", "uuid", "text", "int4", "text", "text"],
    "judge_flags": ["uuid", "uuid", "int4", "text", "text", "text", "bool", "timestamptz"],
    "judge_integrity_adjustments": ["uuid", "uuid", "int4", "text", "text", "int4", "timestamptz"],
    "judge_evidence_refs": [
        "uuid",
        "uuid",
        "text",
        "uuid",
        "uuid",
        "uuid",
        "uuid",
        "int4",
        "text",
        "text",
        "text",
        "text",
        "timestamptz",
    ],
    "judge_output_warnings": ["uuid", "uuid", "text", "text", "text"],
}
"""Column types of the child tables written with a binary COPY (in `INSERTS` column
order). `judge_telemetry` goes as text: its NUMERIC columns arrive as floats."""


def _copy_new(cur: psycopg.Cursor, name: str, rows: list[tuple[Any, ...]]) -> None:
    """COPY rows that cannot conflict (children of judge outputs inserted by this transaction) into their table."""
    _copy(cur, name, STAGED[name][0], rows)


SEEN: dict[str, str] = {
    name: f"""INSERT INTO {table} (id, first_seen_at)
      SELECT u.id, u.at FROM unnest(%s::uuid[], %s::timestamptz[]) AS u(id, at)
      WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.id = u.id AND t.first_seen_at <= u.at)
      ORDER BY u.id
      ON CONFLICT (id) DO UPDATE SET first_seen_at = least({table}.first_seen_at, EXCLUDED.first_seen_at)"""
    for name, table in (("submission_seen", "submissions"), ("rubric_seen", "rubrics"), ("run_seen", "evaluation_runs"))
}
"""A placeholder per id and batch (the earliest time), one statement per table. Ids
already seen as early are filtered out before the upsert, so they take no row lock:
two projectors meeting the same rubric in every batch do not queue behind each other."""


def _seen(cur: psycopg.Cursor, name: str, batch: list[tuple[Any, ...]]) -> int:
    first: dict[str, Any] = {}
    for key, at in batch:
        if key not in first or at < first[key]:
            first[key] = at
    keys = sorted(first)
    cur.execute(SEEN[name], [keys, [first[k] for k in keys]])
    return len(keys)


LOCK_CLAIMS, LOCK_RUNS = "claims", "runs"


def _lock_keys(cur: psycopg.Cursor, claims: set[str], runs: set[str]) -> None:
    """Transaction-scoped advisory locks on the keys whose derived rows this batch
    refreshes, taken in one order before any row lock (no deadlock between projectors)."""
    keys = sorted({(LOCK_CLAIMS, _key32(c)) for c in claims} | {(LOCK_RUNS, _key32(r)) for r in runs})
    cur.execute(
        "SELECT count(pg_advisory_xact_lock(hashtext(current_schema() || '/' || c), k)) "
        "FROM unnest(%s::text[], %s::int[]) AS t(c, k)",
        [[c for c, _ in keys], [k for _, k in keys]],
    )


def _key32(key: str) -> int:
    h = zlib.crc32(key.encode())
    return h - (1 << 32) if h >= 1 << 31 else h


REFRESH_CHECKS = """
WITH ids AS (SELECT DISTINCT unnest(%s::text[]) AS claim_id),
first AS (
  SELECT DISTINCT ON (c.claim_id) c.* FROM claim_checks c JOIN ids USING (claim_id)
  ORDER BY c.claim_id, c.source_partition, c.source_offset),
second AS (
  SELECT DISTINCT ON (c.claim_id) c.* FROM claim_checks c JOIN first f USING (claim_id)
  WHERE c.judge_id <> f.judge_id ORDER BY c.claim_id, c.source_partition, c.source_offset),
d_first AS (
  SELECT DISTINCT ON (d.claim_id) d.* FROM routing_decisions d JOIN ids USING (claim_id)
  ORDER BY d.claim_id, cardinality(d.judge_ids), (d.reason = 'invalid') DESC, d.decided_at, d.event_id),
d_last AS (
  SELECT DISTINCT ON (d.claim_id) d.* FROM routing_decisions d JOIN ids USING (claim_id)
  ORDER BY d.claim_id, cardinality(d.judge_ids) DESC, (d.reason = 'invalid'), d.decided_at DESC, d.event_id)
INSERT INTO checks (claim_id, judge_id, source_id, verdict, score, confidence, reason, passage_quote, passage,
  claim_text, route, route_reason, second_judge_id, second_verdict, second_score, second_confidence,
  second_reason, final_verdict, final_route, final_reason, created_at)
SELECT ids.claim_id,
  coalesce(f.judge_id, df.judge_ids[1], 'unknown'), coalesce(f.source_id, ''),
  coalesce(f.verdict, 'unclear'), f.score, coalesce(f.confidence, 0.0),
  coalesce(f.reason, 'invalid claim check (see invalid_events)'), f.passage_quote, coalesce(f.passage, ''),
  coalesce(f.claim_text, ''), df.route, df.reason, s.judge_id, s.verdict, s.score, s.confidence, s.reason,
  dl.verdict, dl.route, dl.reason, coalesce(f.checked_at, f.created_at, df.decided_at)
FROM ids LEFT JOIN first f USING (claim_id) LEFT JOIN second s USING (claim_id)
  LEFT JOIN d_first df USING (claim_id) LEFT JOIN d_last dl USING (claim_id)
WHERE f.claim_id IS NOT NULL OR df.claim_id IS NOT NULL
ON CONFLICT (claim_id) DO UPDATE SET judge_id = EXCLUDED.judge_id, source_id = EXCLUDED.source_id,
  verdict = EXCLUDED.verdict, score = EXCLUDED.score, confidence = EXCLUDED.confidence, reason = EXCLUDED.reason,
  passage_quote = EXCLUDED.passage_quote, passage = EXCLUDED.passage, claim_text = EXCLUDED.claim_text,
  route = EXCLUDED.route, route_reason = EXCLUDED.route_reason, second_judge_id = EXCLUDED.second_judge_id,
  second_verdict = EXCLUDED.second_verdict, second_score = EXCLUDED.second_score,
  second_confidence = EXCLUDED.second_confidence, second_reason = EXCLUDED.second_reason,
  final_verdict = EXCLUDED.final_verdict, final_route = EXCLUDED.final_route,
  final_reason = EXCLUDED.final_reason, created_at = EXCLUDED.created_at
"""

REFRESH_SCORES = """
INSERT INTO evaluation_reconciled_scores (id, evaluation_run_id, submission_id, revision, status, judge_count,
  successful_judge_count, final_overall_score, final_adjusted_score, weighted_final_score, reconciliation_method,
  has_contradictions, contradiction_details, missing_judges, failed_judges, notice, finalized_at, created_at)
SELECT DISTINCT ON (r.evaluation_run_id) r.evaluation_run_id, r.evaluation_run_id, r.submission_id, r.revision,
  r.status, r.judge_count, r.successful_judge_count, r.final_overall_score, r.final_adjusted_score,
  r.weighted_final_score, r.reconciliation_method, r.has_contradictions, r.contradiction_details,
  r.missing_judges, r.failed_judges, r.notice,
  CASE WHEN r.status = 'final' THEN r.emitted_at END,
  min(r.emitted_at) OVER (PARTITION BY r.evaluation_run_id)
FROM evaluation_reconciled_revisions r WHERE r.evaluation_run_id = ANY(%s::uuid[])
ORDER BY r.evaluation_run_id, (r.status = 'final') DESC, r.revision DESC
ON CONFLICT (evaluation_run_id) DO UPDATE SET revision = EXCLUDED.revision, status = EXCLUDED.status,
  judge_count = EXCLUDED.judge_count, successful_judge_count = EXCLUDED.successful_judge_count,
  final_overall_score = EXCLUDED.final_overall_score, final_adjusted_score = EXCLUDED.final_adjusted_score,
  weighted_final_score = EXCLUDED.weighted_final_score, reconciliation_method = EXCLUDED.reconciliation_method,
  has_contradictions = EXCLUDED.has_contradictions, contradiction_details = EXCLUDED.contradiction_details,
  missing_judges = EXCLUDED.missing_judges, failed_judges = EXCLUDED.failed_judges, notice = EXCLUDED.notice,
  finalized_at = EXCLUDED.finalized_at, created_at = EXCLUDED.created_at
"""

Offsets = Mapping[tuple[str, int], tuple[int | None, int]]
"""(topic, partition) -> (the next_offset this projector believes is stored, or
None if none is; the next offset after this batch)."""


class OffsetConflict(Exception):
    """The stored offsets are not where this batch starts (another projector,
    or a rebuild swapped the schema): the caller re-seeks to `stored`."""

    def __init__(self, stored: dict[tuple[str, int], int | None], believed: dict[tuple[str, int], int | None]):
        moves = ", ".join(f"{t}[{p}] believed {believed.get((t, p))}, stored {o}" for (t, p), o in stored.items())
        super().__init__(f"stored offsets moved: {moves}")
        self.stored = stored


def stored_offsets(conn: psycopg.Connection, consumer: str) -> dict[tuple[str, int], int]:
    rows = conn.execute(
        "SELECT topic, partition, next_offset FROM projection_offsets WHERE consumer = %s", [consumer]
    ).fetchall()
    return {(t, p): o for t, p, o in rows}


@dataclass
class WriteTimings:
    """Where a projector's write time goes, per target table (and the steps
    that are not one table: the offset check, the refreshes, the commit). For
    the bench's per-table breakdown; the cost is two clock reads per table and batch."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    rows: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, step: str, since: float, rows: int = 0) -> float:
        now = time.perf_counter()
        self.seconds[step] += now - since
        self.rows[step] += rows
        return now


def write_batch(
    conn: psycopg.Connection,
    consumer: str,
    rows: Rows,
    offsets: Offsets,
    before_commit: object = None,
    timings: WriteTimings | None = None,
    review_sample: ReviewSample = DEFAULT_SAMPLE,
) -> None:
    """One transaction: check offsets, insert rows, refresh derived rows (the review queue's too), store
    offsets."""
    try:
        _write_batch(conn, consumer, rows, offsets, before_commit, timings, review_sample)
    except BaseException:
        _STAGES.pop(conn, None)
        raise


def _write_batch(
    conn: psycopg.Connection,
    consumer: str,
    rows: Rows,
    offsets: Offsets,
    before_commit: object,
    timings: WriteTimings | None,
    review_sample: ReviewSample,
) -> None:
    tm = timings or WriteTimings()
    clock = time.perf_counter()
    with conn.transaction():
        stored = {
            (t, p): o
            for t, p, o in conn.execute(
                "SELECT topic, partition, next_offset FROM projection_offsets WHERE consumer = %s "
                "AND (topic, partition) IN (SELECT * FROM unnest(%s::text[], %s::int[])) FOR UPDATE",
                [consumer, [t for t, _ in offsets], [p for _, p in offsets]],
            ).fetchall()
        }
        moved = {tp: stored.get(tp) for tp, (believed, _) in offsets.items() if stored.get(tp) != believed}
        if moved:
            raise OffsetConflict(moved, {tp: believed for tp, (believed, _) in offsets.items()})
        clock = tm.add("(offset check)", clock)
        with conn.cursor() as cur:
            if rows.claims or rows.runs:
                _lock_keys(cur, rows.claims, rows.runs)
                clock = tm.add("(advisory locks)", clock, len(rows.claims) + len(rows.runs))
            new: set[Any] = set()
            for table in ORDER:
                batch = rows.tables.get(table)
                if not batch:
                    continue
                if table in SEEN:
                    clock = tm.add(table, clock, _seen(cur, table, batch))
                    continue
                if table in OWNED:
                    owners = rows.owners[table]
                    batch = [row for row, owner in zip(batch, owners, strict=True) if owner in new]
                    if batch:
                        _copy_new(cur, table, batch)
                else:
                    new |= _insert(cur, table, batch, returning=table == "judge_outputs")
                clock = tm.add(table, clock, len(batch))
            with conn.pipeline():
                if rows.claims:
                    cur.execute(REFRESH_CHECKS, [sorted(rows.claims)])
                    refresh_review_items(cur, sorted(rows.claims), review_sample)
                if rows.runs:
                    cur.execute(REFRESH_SCORES, [sorted(rows.runs)])
                if rows.review_runs:
                    refresh_run_review_items(cur, sorted(rows.review_runs))
                agreement = touched(rows, INSERTS)
                if agreement:  # last before the offsets: two projectors hold a mark's row lock only to commit
                    mark_pending(cur, agreement)
                if callable(before_commit):
                    before_commit()
                cur.executemany(
                    "INSERT INTO projection_offsets (consumer, topic, partition, next_offset) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (consumer, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset",
                    [(consumer, t, p, nxt) for (t, p), (_, nxt) in offsets.items()],
                )
            clock = tm.add("(derived-row refresh and offsets, pipelined)", clock, len(rows.claims) + len(rows.runs))
    tm.add("(commit)", clock)
