"""The accounting of a reliability scenario or a soak: what was published against what Postgres and the
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
    # Hashed by Postgres: a soak's hour of raw events is gigabytes of bytes, its hashes a few hundred MB.
    raw_sql = "SELECT topic, encode(sha256(value), 'hex') FROM raw_events WHERE topic = ANY(%s) AND value IS NOT NULL"
    raw = Counter((t, h) for t, h in q(raw_sql, [input_topics]))
    # Timeout stubs are published by the worker itself onto judge.outputs: expected, counted apart.
    stub_sql = ("SELECT topic, encode(sha256(value), 'hex') FROM raw_events WHERE topic = %s "
                "AND value_json->>'status' = 'failed' AND value_json->>'failure_reason' LIKE 'timeout%%'")  # fmt: skip
    stub_raw = Counter((t, h) for t, h in q(stub_sql, [names.judge_outputs]))
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


class TopicChecker:
    """Redeliveries and double decisions on the output topics, fed one record at a time (a soak reads millions)."""

    def __init__(self, names: TopicNames) -> None:
        self.names = names
        self.decision_topics = (names.reconciled, names.done, names.second_judge, names.human_review)
        self.records: Counter[str] = Counter()
        self.ids: dict[str, Counter[str]] = {t: Counter() for t in self.decision_topics}
        self.by_identity: dict[str, dict[tuple[Any, ...], set[str]]] = {t: {} for t in self.decision_topics}
        self.final: set[tuple[Any, ...]] = set()
        self.stub_ids: Counter[str] = Counter()
        self.per_judge: dict[tuple[str, str], set[str]] = {}

    def add(self, topic: str, value: bytes) -> None:
        if topic in self.ids:
            d = json.loads(value)
            self.records[topic] += 1
            self.ids[topic][d["event_id"]] += 1
            ident = _decision_identity(topic, self.names, d)
            if ident is not None:
                self.by_identity[topic].setdefault(ident, set()).add(d["event_id"])
                if d.get("status") == "final":
                    self.final.add(ident)
        elif topic == self.names.judge_outputs:
            d = _object(value)
            if str(d.get("failure_reason") or "").startswith("timeout"):
                self.records["stubs"] += 1
                self.stub_ids[d["judge_run_id"]] += 1
                self.per_judge.setdefault((d["evaluation_run_id"], d["judge_model"]), set()).add(d["judge_run_id"])

    def result(self) -> list[TopicCount]:
        out = []
        reconciled = self.names.reconciled
        for topic in self.decision_topics:
            by_identity = self.by_identity[topic]
            # A final revision decided twice is a double decision. A provisional one
            # re-issued with another judge set is what at-least-once allows when the
            # worker dies after publishing it and before its state reached the
            # changelog; it is counted, not failed (see docs/reliability.md).
            doubles = sum(len(v) - 1 for k, v in by_identity.items() if topic != reconciled or k in self.final)
            reissued = sum(len(v) - 1 for k, v in by_identity.items() if topic == reconciled and k not in self.final)
            redelivered = sum(n - 1 for n in self.ids[topic].values())
            out.append(TopicCount(topic, self.records[topic], redelivered, doubles, reissued))
        redelivered = sum(n - 1 for n in self.stub_ids.values())
        doubles = sum(len(v) - 1 for v in self.per_judge.values())
        out.append(
            TopicCount(f"{self.names.judge_outputs} (timeout stubs)", self.records["stubs"], redelivered, doubles)
        )
        return out


def check_topics(records: list[Any], names: TopicNames) -> list[TopicCount]:
    """`records`: everything read from the output topics (and judge.outputs, for stubs)."""
    checker = TopicChecker(names)
    for r in records:
        checker.add(r.topic, r.value)
    return checker.result()


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
