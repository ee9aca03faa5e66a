"""The review desk's queue as a read model: one item per claim, or evaluation run, a person should look at.

An item is a claim whose final route is `human_review` (source `routed`), or one routed `done` that falls in the
audit sample (source `audit`): its place in [0, 1), from a hash of its claim id, below the audit share. A share
of items, picked the same way, want a second, blind reviewer (`wanted` 2, the overlap). The projector refreshes
the items of every claim a batch touched, from `checks` and `reviews`, in the batch's transaction; a rebuild
computes the same items. The desk only reads them (and keeps its leases beside them).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import psycopg

AUDIT_SHARE_ENV = "JUDGEFLOW_REVIEW_AUDIT_SHARE"
OVERLAP_ENV = "JUDGEFLOW_REVIEW_OVERLAP"


def review_pick(purpose: str, claim_id: str) -> float:
    """A claim's place in [0, 1) for one purpose: SQL's `review_pick` (migration 0014), in Python."""
    digest = hashlib.md5(f"{purpose}:{claim_id}".encode(), usedforsecurity=False).hexdigest()
    return int(digest[:13], 16) / 2**52


@dataclass(frozen=True)
class ReviewSample:
    """Which claims routed `done` are audited, and which items want a second reviewer."""

    audit_share: float = 0.02
    overlap_share: float = 0.1

    def __post_init__(self) -> None:
        for name, value in (("audit share", self.audit_share), ("overlap share", self.overlap_share)):
            if not 0 <= value <= 1:
                raise ValueError(f"review {name} {value:g}: from 0 to 1")

    @classmethod
    def from_env(cls) -> ReviewSample:
        """`JUDGEFLOW_REVIEW_AUDIT_SHARE` and `JUDGEFLOW_REVIEW_OVERLAP`, or the defaults."""
        shares = []
        for name, default in ((AUDIT_SHARE_ENV, cls.audit_share), (OVERLAP_ENV, cls.overlap_share)):
            raw = os.environ.get(name) or str(default)
            try:
                shares.append(float(raw))
            except ValueError:
                raise ValueError(f"{name}={raw!r}: a share from 0 to 1") from None
        return cls(*shares)

    def audited(self, claim_id: str) -> bool:
        return review_pick("audit", claim_id) < self.audit_share

    def wanted(self, claim_id: str) -> int:
        return 2 if review_pick("overlap", claim_id) < self.overlap_share else 1


DEFAULT_SAMPLE = ReviewSample()

REFRESH_REVIEW_ITEMS = """
WITH ids AS (SELECT DISTINCT unnest(%(ids)s::text[]) AS claim_id),
rv AS (
  SELECT r.claim_id, array_agg(DISTINCT r.reviewer ORDER BY r.reviewer) AS reviewers
  FROM reviews r JOIN ids USING (claim_id) GROUP BY r.claim_id),
item AS (
  SELECT c.claim_id, CASE WHEN c.final_route = 'human_review' THEN 'routed' ELSE 'audit' END AS source,
         CASE WHEN review_pick('overlap', c.claim_id) < %(overlap)s THEN 2 ELSE 1 END AS wanted,
         coalesce(rv.reviewers, '{}') AS reviewers, c.created_at
  FROM checks c JOIN ids USING (claim_id) LEFT JOIN rv USING (claim_id)
  WHERE c.final_route = 'human_review'
     OR (c.final_route = 'done' AND review_pick('audit', c.claim_id) < %(audit)s)
     OR EXISTS (SELECT 1 FROM review_items i WHERE i.claim_id = c.claim_id))
INSERT INTO review_items (claim_id, source, wanted, reviewers, open, routed_at)
SELECT claim_id, source, wanted, reviewers, cardinality(reviewers) < wanted, created_at FROM item
ON CONFLICT (claim_id) DO UPDATE SET reviewers = EXCLUDED.reviewers, open = EXCLUDED.open,
  routed_at = EXCLUDED.routed_at
"""
"""An item keeps the source and `wanted` it was first made with; its reviewers and `open` follow `reviews`."""


def refresh_review_items(cur: psycopg.Cursor, claims: list[str], sample: ReviewSample) -> None:
    cur.execute(REFRESH_REVIEW_ITEMS, {"ids": claims, "audit": sample.audit_share, "overlap": sample.overlap_share})


REFRESH_RUN_REVIEW_ITEMS = """
WITH ids AS (SELECT DISTINCT unnest(%(ids)s::uuid[]) AS evaluation_run_id),
routed AS (
  SELECT DISTINCT ON (d.evaluation_run_id) d.evaluation_run_id, d.reason, d.decided_at
  FROM routing_decisions d JOIN ids USING (evaluation_run_id)
  WHERE d.subject = 'evaluation' AND d.route = 'human_review'
  ORDER BY d.evaluation_run_id, d.decided_at, d.event_id),
rv AS (
  SELECT r.evaluation_run_id, array_agg(DISTINCT r.reviewer ORDER BY r.reviewer) AS reviewers
  FROM run_reviews r JOIN ids USING (evaluation_run_id) GROUP BY r.evaluation_run_id)
INSERT INTO run_review_items (evaluation_run_id, reason, reviewers, open, routed_at)
SELECT evaluation_run_id, reason, coalesce(rv.reviewers, '{}'), cardinality(coalesce(rv.reviewers, '{}')) = 0,
       decided_at
FROM routed LEFT JOIN rv USING (evaluation_run_id)
ON CONFLICT (evaluation_run_id) DO UPDATE SET reviewers = EXCLUDED.reviewers, open = EXCLUDED.open
"""
"""A run routed to human review is an item until one person has reviewed it (runs have no audit sample and
no overlap); a review that arrives before the routing decision is counted when the decision does."""


def refresh_run_review_items(cur: psycopg.Cursor, runs: list[str]) -> None:
    cur.execute(REFRESH_RUN_REVIEW_ITEMS, {"ids": runs})
