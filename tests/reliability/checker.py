"""The reliability checker: what was published against what Postgres and the
output topics hold, table by table.

Every published event must be in the read models, or in `invalid_events`
with a code, exactly once. For each table the checker counts rows that are
lost (expected, absent), duplicated (present more than once) and unexpected
(present, never published). On the output topics it tells redeliveries (the
same event id again: at-least-once, harmless, reported) from double decisions
(a second, different event id for one run revision, one claim's first route,
one stub identity): those must never happen.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import psycopg

from streams.topics import TopicNames


def sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


@dataclass
class Published:
    """Everything a scenario sent, by identity."""

    records: Counter[tuple[str, str]] = field(default_factory=Counter)  # (topic, sha256) -> times sent
    outputs: set[str] = field(default_factory=set)  # judge_run_id of valid judge outputs
    runs: set[str] = field(default_factory=set)
    checks: set[tuple[str, str]] = field(default_factory=set)  # (claim_id, judge_id)
    invalid: Counter[str] = field(default_factory=Counter)  # sha256 of payloads that must be dead-lettered
    stub_models: Counter[str] = field(default_factory=Counter)  # run_id -> judges expected to time out

    def record(self, topic: str, value: bytes) -> None:
        self.records[(topic, sha(value))] += 1

    @property
    def events(self) -> int:
        return sum(self.records.values())


@dataclass
class TableCount:
    table: str
    expected: int
    found: int
    lost: int
    duplicated: int
    unexpected: int

    @property
    def ok(self) -> bool:
        return self.lost == self.duplicated == self.unexpected == 0


def _compare(table: str, expected: Counter[Any], found: Counter[Any]) -> TableCount:
    lost = sum((expected - found).values())
    unexpected = sum(n for k, n in found.items() if k not in expected)
    duplicated = sum(n - expected[k] for k, n in found.items() if k in expected and n > expected[k])
    return TableCount(table, sum(expected.values()), sum(found.values()), lost, duplicated, unexpected)


def check_database(conn: psycopg.Connection, names: TopicNames, pub: Published) -> list[TableCount]:
    q = conn.execute
    stubs = {
        r[0]: r[1]
        for r in q("SELECT judge_run_id::text, evaluation_run_id::text FROM judge_outputs "
                   "WHERE status = 'failed' AND failure_reason LIKE 'timeout%'").fetchall()
    }  # fmt: skip
    input_topics = [names.rubrics, names.runs, names.judge_outputs, names.checks, names.reviews]
    raw = Counter(
        (t, sha(bytes(v)))
        for t, v in q(
            "SELECT topic, value FROM raw_events WHERE topic = ANY(%s) AND value IS NOT NULL", [input_topics]
        ).fetchall()  # fmt: skip
    )
    # Timeout stubs are published by the worker itself onto judge.outputs: expected, counted apart.
    stub_sql = ("SELECT topic, value FROM raw_events WHERE topic = %s AND value_json->>'status' = 'failed' "
                "AND value_json->>'failure_reason' LIKE 'timeout%%'")  # fmt: skip
    stub_raw = Counter((t, sha(bytes(v))) for t, v in q(stub_sql, [names.judge_outputs]).fetchall())
    expected_raw = Counter(pub.records)
    for key in stub_raw:
        expected_raw[key] = expected_raw.get(key, 0) + 1
    results = [_compare("raw_events", expected_raw, raw)]
    outputs = Counter(r[0] for r in q("SELECT judge_run_id::text FROM judge_outputs").fetchall())
    expected_outputs = Counter(pub.outputs) + Counter(stubs.keys())
    results.append(_compare("judge_outputs", expected_outputs, outputs))
    stub_runs = Counter(stubs.values())
    results.append(_compare("judge_outputs (timeout stubs per run)", Counter(pub.stub_models), stub_runs))
    invalid = Counter(r[0] for r in q("SELECT original_sha256 FROM invalid_events").fetchall())
    results.append(_compare("invalid_events", pub.invalid, invalid))
    results.append(_compare("claim_checks", Counter(pub.checks),
                            Counter(q("SELECT claim_id, judge_id FROM claim_checks").fetchall())))  # fmt: skip
    claims = Counter(c for c, _ in pub.checks)
    results.append(_compare("checks", Counter(claims.keys()), Counter(r[0] for r in q("SELECT claim_id FROM checks"))))
    first_routes = Counter(r[0] for r in q("SELECT claim_id FROM routing_decisions WHERE subject = 'claim' "
                                           "AND cardinality(judge_ids) = 1").fetchall())  # fmt: skip
    results.append(_compare("routing_decisions (claims, first judge)", Counter(claims.keys()), first_routes))
    eval_routes = Counter(r[0] for r in q("SELECT evaluation_run_id::text FROM routing_decisions "
                                          "WHERE subject = 'evaluation'").fetchall())  # fmt: skip
    results.append(_compare("routing_decisions (evaluations)", Counter(pub.runs), eval_routes))
    finals = Counter(r[0] for r in q("SELECT evaluation_run_id::text FROM evaluation_reconciled_revisions "
                                     "WHERE status = 'final'").fetchall())  # fmt: skip
    results.append(_compare("evaluation_reconciled_revisions (final)", Counter(pub.runs), finals))
    scores = Counter(r[0] for r in q("SELECT evaluation_run_id::text FROM evaluation_reconciled_scores "
                                     "WHERE finalized_at IS NOT NULL").fetchall())  # fmt: skip
    results.append(_compare("evaluation_reconciled_scores (final)", Counter(pub.runs), scores))
    gaps = q("SELECT count(*) FROM (SELECT evaluation_run_id FROM evaluation_reconciled_revisions "
             "GROUP BY evaluation_run_id HAVING max(revision) <> count(*)) g").fetchone()  # fmt: skip
    results.append(TableCount("evaluation_reconciled_revisions (gaps)", 0, 0, int(gaps[0]) if gaps else 0, 0, 0))
    return results


@dataclass
class TopicCount:
    topic: str
    records: int
    redelivered: int  # the same event id again
    double_decisions: int  # a second, different event for one decision identity
    reissued: int = 0  # a provisional revision number issued again with another judge set


def _decision_identity(topic: str, names: TopicNames, doc: dict[str, Any]) -> tuple[Any, ...] | None:
    if topic == names.reconciled:
        return ("revision", doc.get("evaluation_run_id"), doc.get("revision"))
    if doc.get("subject") == "claim":
        return ("claim", doc.get("claim_id"), len(doc.get("judge_ids") or []), doc.get("reason") == "invalid")
    if doc.get("subject") == "evaluation":
        return ("evaluation", doc.get("evaluation_run_id"))
    return None


def _object(raw: bytes) -> dict[str, Any]:
    """A record's JSON object, or {} (judge.outputs also holds the malformed events)."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def check_topics(records: list[Any], names: TopicNames) -> list[TopicCount]:
    """`records`: everything read from the output topics (and judge.outputs, for stubs)."""
    out = []
    for topic in (names.reconciled, names.done, names.second_judge, names.human_review):
        docs = [json.loads(r.value) for r in records if r.topic == topic]
        ids = Counter(d["event_id"] for d in docs)
        by_identity: dict[tuple[Any, ...], set[str]] = {}
        final: set[tuple[Any, ...]] = set()
        for d in docs:
            ident = _decision_identity(topic, names, d)
            if ident is not None:
                by_identity.setdefault(ident, set()).add(d["event_id"])
                if d.get("status") == "final":
                    final.add(ident)
        # A final revision decided twice is a double decision. A provisional one
        # re-issued with another judge set is what at-least-once allows when the
        # worker dies after publishing it and before its state reached the
        # changelog; it is counted, not failed (see the README).
        doubles = sum(len(v) - 1 for k, v in by_identity.items() if topic != names.reconciled or k in final)
        reissued = sum(len(v) - 1 for k, v in by_identity.items() if topic == names.reconciled and k not in final)
        out.append(TopicCount(topic, len(docs), sum(n - 1 for n in ids.values()), doubles, reissued))
    stubs = [_object(r.value) for r in records if r.topic == names.judge_outputs]
    stubs = [d for d in stubs if str(d.get("failure_reason") or "").startswith("timeout")]
    stub_ids = Counter(d["judge_run_id"] for d in stubs)
    per_judge: dict[tuple[str, str], set[str]] = {}
    for d in stubs:
        per_judge.setdefault((d["evaluation_run_id"], d["judge_model"]), set()).add(d["judge_run_id"])
    redelivered = sum(n - 1 for n in stub_ids.values())
    doubles = sum(len(v) - 1 for v in per_judge.values())
    out.append(TopicCount(f"{names.judge_outputs} (timeout stubs)", len(stubs), redelivered, doubles))
    return out


def summary(db: list[TableCount], topics: list[TopicCount]) -> dict[str, int]:
    return {
        "lost": sum(t.lost for t in db),
        "duplicated": sum(t.duplicated for t in db),
        "unexpected": sum(t.unexpected for t in db),
        "redelivered": sum(t.redelivered for t in topics),
        "double_decisions": sum(t.double_decisions for t in topics),
        "provisional_reissued": sum(t.reissued for t in topics),
    }


def describe(db: list[TableCount], topics: list[TopicCount]) -> str:
    lines = [f"{'table':48} {'expected':>8} {'found':>8} {'lost':>5} {'dup':>5} {'unexp':>5}"]
    lines += [f"{t.table:48} {t.expected:8} {t.found:8} {t.lost:5} {t.duplicated:5} {t.unexpected:5}" for t in db]
    lines += [f"{'topic':48} {'records':>8} {'redeliv':>8} {'double':>6} {'reissued':>8}"]
    lines += [f"{t.topic:48} {t.records:8} {t.redelivered:8} {t.double_decisions:6} {t.reissued:8}" for t in topics]
    return "\n".join(lines)
