"""The desk's side of Postgres: leases on the queue's items (its only state), what an item shows, and the
figures the page keeps in view.

"Next" hands a reviewer the oldest item nobody holds. Items are tried in queue order; one another reviewer is
taking at that moment is skipped (a transaction-scoped advisory lock, the desk's SKIP LOCKED: a row lock on
the read model would need UPDATE on it), and a unique index on (claim, slot) among open leases makes a second
lease of the same slot impossible even between two snapshots: the loser retries. An item wanting two
reviewers (the overlap) has two slots; nobody holds both. Expired leases are closed before each hand-out, so
their items return. Losing the whole table returns every held item to the queue and loses no review.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from judgeflow.desk import runs
from judgeflow.desk.errors import STATUS, DeskError
from streams.envelope import iso

__all__ = ["STATUS", "DeskError", "LeaseStore"]

VERDICTS = ("pass", "fail", "unclear")
LEASE_SECONDS = 300.0
"""JUDGEFLOW_REVIEW_LEASE_SECONDS: how long an item stays with a reviewer without a renewal."""
SKIP_COOLDOWN_SECONDS = 3600
"""An item a reviewer skipped is not handed to the same reviewer again for this long."""
HAND_OUT_ATTEMPTS = 8
REVIEW_NS = uuid.UUID("6a3e0f55-2d1c-5b8e-9c47-1f0d8a6b2e93")
"""`review_id` = uuid5(REVIEW_NS, lease_id): a double submit of one lease is one review."""


def review_id_for(lease_id: str) -> str:
    return str(uuid.uuid5(REVIEW_NS, lease_id))


def check_verdict(value: object) -> str:
    if value not in VERDICTS:
        raise DeskError("INVALID_VERDICT", f"verdict must be one of {', '.join(VERDICTS)}, not {value!r}")
    return str(value)


@dataclass(frozen=True)
class Submission:
    """What a submit publishes: a `HumanReview` 1.1 (its key is the claim id)."""

    review: dict[str, Any]
    already_published: bool
    """The lease was submitted before: the same review id is answered, nothing is sent again."""


EXPIRE = """UPDATE review_leases SET closed = 'expired', closed_at = expires_at
WHERE closed IS NULL AND expires_at <= now()"""

CLAIM_QUEUE = """
WITH queue AS (
  SELECT i.claim_id, i.source, i.wanted,
         (SELECT count(*) FROM (SELECT unnest(i.reviewers) UNION SELECT l.reviewer FROM review_leases l
           WHERE l.claim_id = i.claim_id AND (l.closed IS NULL OR l.closed = 'submitted')) who) AS taken
  FROM review_items i
  WHERE i.open AND NOT %(me)s = ANY(i.reviewers) {older}
    AND NOT EXISTS (SELECT 1 FROM review_leases l WHERE l.claim_id = i.claim_id AND l.reviewer = %(me)s
      AND (l.closed IS NULL OR l.closed = 'submitted'
           OR (l.closed = 'skipped' AND l.closed_at > now() - %(cooldown)s * interval '1 second')))
  ORDER BY i.routed_at, i.claim_id
  OFFSET 0)
SELECT 'claim', claim_id, source, wanted, taken FROM queue
WHERE CASE WHEN taken < wanted THEN pg_try_advisory_xact_lock(hashtextextended('judgeflow.review:' || claim_id, 0))
      ELSE false END
LIMIT 1"""
CLAIM_CANDIDATE = CLAIM_QUEUE.format(older="")
"""The oldest claim with a free slot that this reviewer has not reviewed, held or lately skipped; one another
reviewer is taking right now is passed over (its advisory lock is held)."""
CLAIM_CANDIDATE_BEFORE = CLAIM_QUEUE.format(older="AND i.routed_at <= %(before)s")
"""The same, among claims routed no later than `before` (the oldest open run)."""

OLDEST_RUN = "SELECT routed_at FROM run_review_items WHERE open ORDER BY routed_at LIMIT 1"
RUN_CANDIDATE = """
WITH queue AS (
  SELECT r.evaluation_run_id::text AS run_id,
         cardinality(r.reviewers) + (SELECT count(*) FROM review_leases l
           WHERE l.evaluation_run_id = r.evaluation_run_id AND (l.closed IS NULL OR l.closed = 'submitted')) AS taken
  FROM run_review_items r
  WHERE r.open AND NOT EXISTS (SELECT 1 FROM review_leases l WHERE l.evaluation_run_id = r.evaluation_run_id
      AND l.reviewer = %(me)s AND l.closed = 'skipped'
      AND l.closed_at > now() - %(cooldown)s * interval '1 second')
  ORDER BY r.routed_at, r.evaluation_run_id
  OFFSET 0)
SELECT 'run', run_id, 'routed', 1, taken FROM queue
WHERE CASE WHEN taken < 1 THEN pg_try_advisory_xact_lock(hashtextextended('judgeflow.review:' || run_id, 0))
      ELSE false END
LIMIT 1"""
"""The oldest run nobody holds or reviewed (a run wants one reviewer), not lately skipped by this reviewer."""

LEASE = """INSERT INTO review_leases (lease_id, claim_id, evaluation_run_id, slot, reviewer, source, expires_at)
VALUES (%s, %s, %s, %s, %s, %s, now() + %s * interval '1 second') RETURNING expires_at"""

ITEM = """SELECT claim_id, claim_text, passage, passage_quote, created_at FROM checks WHERE claim_id = %s"""
REASONS = """SELECT judge_id, reason, passage_quote FROM claim_checks WHERE claim_id = %s
ORDER BY source_partition, source_offset"""
VERDICTS_SQL = """SELECT judge_id, verdict, score, confidence, reason FROM claim_checks WHERE claim_id = %s
ORDER BY source_partition, source_offset"""
DECISION = """SELECT coalesce(final_verdict, verdict) AS verdict, coalesce(final_route, route) AS route,
coalesce(final_reason, route_reason) AS reason FROM checks WHERE claim_id = %s"""

STATS = """
WITH open_items AS (
  SELECT routed_at, wanted - cardinality(reviewers) AS wanted FROM review_items WHERE open
  UNION ALL SELECT routed_at, 1 FROM run_review_items WHERE open),
timed AS (
  SELECT review_seconds FROM reviews WHERE review_seconds IS NOT NULL AND created_at > now() - interval '7 days'
  UNION ALL SELECT review_seconds FROM run_reviews
  WHERE review_seconds IS NOT NULL AND created_at > now() - interval '7 days')
SELECT (SELECT count(*) FROM open_items) AS depth,
       (SELECT coalesce(sum(wanted), 0) FROM open_items) AS reviews_wanted,
       (SELECT extract(epoch FROM now() - min(routed_at)) FROM open_items) AS oldest_age_seconds,
       (SELECT count(*) FROM review_leases WHERE closed IS NULL AND expires_at > now()) AS held,
       (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY review_seconds) FROM timed) AS median_seconds,
       (SELECT count(*) FROM timed) AS timed_reviews,
       (SELECT count(*) FROM (
          SELECT claim_id AS item FROM reviews WHERE reviewer = %(me)s AND created_at >= %(today)s
          UNION SELECT evaluation_run_id::text FROM run_reviews WHERE reviewer = %(me)s AND created_at >= %(today)s
          UNION SELECT coalesce(claim_id, evaluation_run_id::text) FROM review_leases
          WHERE reviewer = %(me)s AND closed = 'submitted' AND closed_at >= %(today)s) mine) AS reviewed_today"""


class LeaseStore:
    """The queue's items and the desk's leases, for one schema."""

    def __init__(self, pool: AsyncConnectionPool, lease_seconds: float = LEASE_SECONDS) -> None:
        self.pool = pool
        self.lease_seconds = lease_seconds

    async def next(self, reviewer: str) -> dict[str, Any] | None:
        """A new lease on the oldest item nobody holds, with what the reviewer may see first; None if empty."""
        for _ in range(HAND_OUT_ATTEMPTS):
            try:
                async with self.pool.connection() as conn, conn.transaction():
                    await conn.execute(EXPIRE)
                    found = await _candidate(conn, reviewer)
                    if found is None:
                        return None
                    kind, item_id, source, _wanted, taken = found
                    slot = int(taken) + 1
                    lease_id = str(uuid.uuid4())
                    seen_as = "overlap" if slot == 2 else source
                    claim_id, run_id = (item_id, None) if kind == "claim" else (None, item_id)
                    cur = await conn.execute(
                        LEASE, (lease_id, claim_id, run_id, slot, reviewer, seen_as, self.lease_seconds)
                    )
                    (expires_at,) = await cur.fetchone()  # type: ignore[misc]
                    if kind == "claim":
                        item = await _blind_item(conn, item_id, seen_as)
                    else:
                        item = await runs.blind_run(conn, item_id)
            except psycopg.errors.UniqueViolation:
                continue  # another reviewer took this slot between two snapshots: try the next item
            return {"lease_id": lease_id, "expires_at": iso(expires_at), "item": item}
        return None

    async def blind(self, lease_id: str, reviewer: str, body: dict[str, Any]) -> dict[str, Any]:
        """Record the reviewer's choice before the reveal (the first one stands) and reveal the judges: a
        claim's `{verdict}`, a run's `{lane_scores, overall}`."""
        async with self.pool.connection() as conn, conn.transaction():
            lease = await _held(conn, lease_id, reviewer)
            if lease["evaluation_run_id"] is not None:
                return await self._blind_run(conn, lease, body)
            choice = check_verdict(body.get("verdict"))
            if lease["blind_verdict"] is None:
                await conn.execute(
                    "UPDATE review_leases SET blind_verdict = %s, blind_at = now() WHERE lease_id = %s",
                    (choice, lease_id),
                )
            return await _reveal(conn, lease["claim_id"], lease["blind_verdict"] or choice)

    async def _blind_run(
        self, conn: psycopg.AsyncConnection[Any], lease: dict[str, Any], body: dict[str, Any]
    ) -> dict[str, Any]:
        run_id = str(lease["evaluation_run_id"])
        blind = lease["blind_scores"]
        if blind is None:
            lanes, _ = await runs.reconciled(conn, run_id)
            scores, overall = runs.check_scores(lanes, body.get("lane_scores"), body.get("overall"))
            blind = {"lane_scores": scores, "overall": overall}
            await conn.execute(
                "UPDATE review_leases SET blind_scores = %s, blind_at = now() WHERE lease_id = %s",
                (Jsonb(blind), lease["lease_id"]),
            )
        return await runs.reveal_run(conn, run_id, blind)

    async def prepare_submit(self, lease_id: str, reviewer: str, body: dict[str, Any]) -> Submission:
        """The review a submit publishes, after every check; the lease is closed by `submitted` once the
        broker has acknowledged it. A claim's body is `{final_verdict, note?}`, a run's `{lane_scores,
        overall, note?}`."""
        note = body.get("note")
        if note is not None and not isinstance(note, str):
            raise DeskError("INVALID_REQUEST", "note must be text")
        text = (note or "").strip() or None
        async with self.pool.connection() as conn, conn.transaction():
            lease = await _held(conn, lease_id, reviewer, submitted_ok=True)
            if lease["evaluation_run_id"] is not None:
                return await _prepare_run(conn, lease, body, text)
            verdict = check_verdict(body.get("final_verdict"))
            claim_id = lease["claim_id"]
            if lease["closed"] == "submitted":
                return Submission(_review(lease, verdict, text), already_published=True)
            if lease["blind_verdict"] is None:
                raise DeskError("BLIND_FIRST", "choose a verdict before the judges' verdicts are shown (/blind)")
            cur = await conn.execute(
                "SELECT %s = ANY(reviewers) FROM review_items WHERE claim_id = %s", (reviewer, claim_id)
            )
            row = await cur.fetchone()
            if row is not None and row[0]:
                raise DeskError("ALREADY_REVIEWED", f"{reviewer} has already reviewed claim {claim_id}")
            cur = await conn.execute(DECISION, (claim_id,))
            decided = await cur.fetchone()
            judged = decided[0] if decided else None
            if verdict != judged and text is None:
                raise DeskError("NOTE_REQUIRED", f"overturning the judge's {judged} needs a note saying why")
            return Submission(_review(lease, verdict, text), already_published=False)

    async def submitted(self, lease_id: str, review_id: str) -> None:
        async with self.pool.connection() as conn:
            await conn.execute(
                "UPDATE review_leases SET closed = 'submitted', closed_at = now(), review_id = %s "
                "WHERE lease_id = %s AND closed IS DISTINCT FROM 'submitted'",
                (review_id, lease_id),
            )

    async def renew(self, lease_id: str, reviewer: str) -> str:
        async with self.pool.connection() as conn, conn.transaction():
            await _held(conn, lease_id, reviewer)
            cur = await conn.execute(
                "UPDATE review_leases SET expires_at = now() + %s * interval '1 second' WHERE lease_id = %s "
                "RETURNING expires_at",
                (self.lease_seconds, lease_id),
            )
            (expires_at,) = await cur.fetchone()  # type: ignore[misc]
            return iso(expires_at)

    async def skip(self, lease_id: str, reviewer: str) -> None:
        async with self.pool.connection() as conn, conn.transaction():
            await _held(conn, lease_id, reviewer)
            await conn.execute(
                "UPDATE review_leases SET closed = 'skipped', closed_at = now() WHERE lease_id = %s", (lease_id,)
            )

    async def stats(self, reviewer: str) -> dict[str, Any]:
        """The figures the page keeps in view: the reviewer's count today, the queue, and the hours to empty
        it at the measured median time per review (unknown until some reviews were timed)."""
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(STATS, {"me": reviewer, "today": today})
            row: dict[str, Any] = await cur.fetchone()  # type: ignore[assignment]
        median = row["median_seconds"]
        wanted = int(row["reviews_wanted"])
        age = row["oldest_age_seconds"]
        return {
            "reviewer": reviewer,
            "reviewed_today": int(row["reviewed_today"]),
            "depth": int(row["depth"]),
            "reviews_wanted": wanted,
            "held": int(row["held"]),
            "oldest_age_seconds": None if age is None else round(float(age), 1),
            "median_seconds": None if median is None else round(float(median), 1),
            "timed_reviews": int(row["timed_reviews"]),
            "hours_to_empty": None if median is None else round(wanted * float(median) / 3600, 2),
        }


async def _candidate(conn: psycopg.AsyncConnection[Any], reviewer: str) -> tuple[Any, ...] | None:
    """(kind, item id, source, wanted, taken) of the item to hand out, oldest first: the claims routed before
    the oldest open run, then the runs, then the other claims. Without open runs (the usual case) it is one
    index read more than the claims' own query."""
    args: dict[str, Any] = {"me": reviewer, "cooldown": SKIP_COOLDOWN_SECONDS}
    cur = await conn.execute(OLDEST_RUN, prepare=True)
    oldest_run = await cur.fetchone()
    if oldest_run is not None:
        cur = await conn.execute(CLAIM_CANDIDATE_BEFORE, {**args, "before": oldest_run[0]}, prepare=True)
        if (found := await cur.fetchone()) is not None:
            return found
        cur = await conn.execute(RUN_CANDIDATE, args, prepare=True)
        if (found := await cur.fetchone()) is not None:
            return found
    cur = await conn.execute(CLAIM_CANDIDATE, args, prepare=True)
    return await cur.fetchone()


async def _held(
    conn: psycopg.AsyncConnection[Any], lease_id: str, reviewer: str, submitted_ok: bool = False
) -> dict[str, Any]:
    """The lease, locked, if this reviewer holds it and it is still open (or, for a submit, already
    submitted); otherwise the refusal."""
    try:
        uuid.UUID(lease_id)
    except ValueError:
        raise DeskError("UNKNOWN_LEASE", f"no lease {lease_id!r}") from None
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(
        "SELECT lease_id::text, claim_id, evaluation_run_id, slot, reviewer, source, leased_at, expires_at, "
        "blind_verdict, blind_scores, closed, closed_at, expires_at <= now() AS expired, "
        "extract(epoch FROM now() - leased_at) AS seconds "
        "FROM review_leases WHERE lease_id = %s FOR UPDATE",
        (lease_id,),
    )
    lease = await cur.fetchone()
    if lease is None:
        raise DeskError("UNKNOWN_LEASE", f"no lease {lease_id}")
    if lease["reviewer"] != reviewer:
        raise DeskError("NOT_YOUR_LEASE", f"lease {lease_id} is held by another reviewer")
    if lease["closed"] == "submitted":
        if submitted_ok:
            return lease
        raise DeskError("ALREADY_REVIEWED", f"lease {lease_id} was submitted")
    if lease["closed"] is not None or lease["expired"]:
        raise DeskError("LEASE_EXPIRED", f"lease {lease_id} has expired or was skipped: take the next item")
    return lease


async def _prepare_run(
    conn: psycopg.AsyncConnection[Any], lease: dict[str, Any], body: dict[str, Any], note: str | None
) -> Submission:
    run_id = str(lease["evaluation_run_id"])
    review_id = review_id_for(lease["lease_id"])
    lanes, reconciled = await runs.reconciled(conn, run_id)
    scores = runs.check_scores(lanes, body.get("lane_scores"), body.get("overall"))
    if lease["closed"] == "submitted":
        return Submission(runs.run_review(lease, review_id, scores, note), already_published=True)
    if lease["blind_scores"] is None:
        raise DeskError("BLIND_FIRST", "give your scores before the judges' scores are shown (/blind)")
    cur = await conn.execute("SELECT NOT open FROM run_review_items WHERE evaluation_run_id = %s", (run_id,))
    row = await cur.fetchone()
    if row is not None and row[0]:
        raise DeskError("ALREADY_REVIEWED", f"run {run_id} has been reviewed")
    if scores[1] != reconciled and note is None:
        raise DeskError("NOTE_REQUIRED", f"a final score other than the reconciled {reconciled} needs a note")
    return Submission(runs.run_review(lease, review_id, scores, note), already_published=False)


def _review(lease: dict[str, Any], verdict: str, note: str | None) -> dict[str, Any]:
    return {
        "schema_version": "1.1",
        "review_id": review_id_for(lease["lease_id"]),
        "claim_id": lease["claim_id"],
        "reviewer": lease["reviewer"],
        "final_verdict": verdict,
        "notes": note,
        "created_at": iso(datetime.now(UTC)),
        "review_seconds": round(min(float(lease["seconds"]), 86_400.0), 3),
        "blind_verdict": lease["blind_verdict"],
        "source": lease["source"],
        "lease_id": lease["lease_id"],
    }


async def _blind_item(conn: psycopg.AsyncConnection[Any], claim_id: str, source: str) -> dict[str, Any]:
    """What the reviewer sees first: the claim, the passage, each judge's reason and quote; never a verdict,
    a score or a confidence."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(ITEM, (claim_id,))
    check = await cur.fetchone() or {}
    await cur.execute(REASONS, (claim_id,))
    judges = await cur.fetchall()
    passage, quote = check.get("passage") or "", check.get("passage_quote")
    return {
        "kind": "claim",
        "source": source,
        "claim_id": claim_id,
        "claim_text": check.get("claim_text") or "",
        "passage": passage,
        "passage_quote": quote,
        "quote_found": bool(quote) and quote in passage,
        "judges": [
            {"judge_id": j["judge_id"], "reason": j["reason"], "passage_quote": j["passage_quote"]} for j in judges
        ],
        "routed_at": iso(check["created_at"]) if check.get("created_at") else None,
    }


async def _reveal(conn: psycopg.AsyncConnection[Any], claim_id: str, blind: str) -> dict[str, Any]:
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(VERDICTS_SQL, (claim_id,))
    judges = await cur.fetchall()
    await cur.execute(DECISION, (claim_id,))
    decided = await cur.fetchone() or {}
    return {
        "blind_verdict": blind,
        "judges": [dict(j) for j in judges],
        "decision": {"verdict": decided.get("verdict"), "route": decided.get("route"), "reason": decided.get("reason")},
    }
