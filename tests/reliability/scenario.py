"""One reliability scenario: a seeded workload, real worker and projector
processes, a fault, and the checker's verdict.

The workload is evaluation runs (three judges each; optionally one judge in
some runs that never answers, so timeout stubs are part of it), claim checks
and malformed events. `wait_accounted` waits until Postgres shows every run
final, every claim routed and every malformed event dead-lettered.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.accounting import (
    Published,
    TableCount,
    TopicCount,
    check_database,
    check_topics,
    describe,
    sha,
    summary,
)
from bench.harness import read_all
from judgeflow import workload
from projections.migrate import migrate
from streams.topics import TopicNames
from tests.support import (
    ProjectorProcess,
    Worker,
    consume_until,
    create_topics,
    produce,
    projected_topic_ends,
    projection_reached,
    unique_prefix,
)

Record = tuple[str, bytes | None, bytes]
MALFORMED = (
    b"\xff\xfe not utf-8",
    b"{truncated",
    b'{"schema_version": "2.1", "schema_version": "2.0"}',
    b'{"schema_version": "2.1", "overall_score": NaN}',
    b'{"schema_version": "9.0"}',
    b"[1, 2, 3]",
)


SOAK = max(1, int(os.environ.get("JUDGEFLOW_SOAK", "1") or 1))
"""The soak variant: JUDGEFLOW_SOAK=N multiplies every workload, the faults of
scenario 1 and every time limit by N (default 1, what `.ci/run` runs)."""


@dataclass
class Scenario:
    kafka: str
    database_url: str
    tmp: Path
    seed: int
    runs: int = 40 * SOAK
    claims: int = 400 * SOAK
    invalid: int = 24 * SOAK
    silent_every: int = 0  # every Nth run has one judge that never answers
    judge_timeout_s: float = 3600.0
    replication: int = 1
    prefix: str = field(default_factory=unique_prefix)
    pub: Published = field(default_factory=Published)
    faults: list[str] = field(default_factory=list)
    client: dict[str, Any] = field(default_factory=dict)
    """aiokafka's security settings for the scenario's own clients (on a secured broker: its admin, who creates
    the topics and reads everything back; `send_client` is who publishes the workload)."""
    send_client: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.names = TopicNames.with_prefix(self.prefix)
        self.schema = self.prefix.rstrip(".")
        create_topics(self.kafka, self.names, replication=self.replication, **self.client)
        migrate(self.database_url, self.schema)

    # -- workload ---------------------------------------------------------------------------------------

    def workload(self) -> list[Record]:
        rng = random.Random(self.seed)
        names, pub = self.names, self.pub
        rubric = workload.rubric(workload.stable_id("reliability-rubric", self.seed))
        rid = rubric["rubric_version_id"]
        records: list[Record] = [self._rec(names.rubrics, rid.encode(), json.dumps(rubric).encode())]
        runs: list[Record] = []
        for i in range(self.runs):
            run_id = workload.stable_id("reliability-run", self.prefix, i)
            run = workload.evaluation_run(run_id, rubric_id=rid, timeout_s=self.judge_timeout_s)
            run["started_at"] = workload.iso(workload.datetime.now(workload.UTC))
            pub.runs.add(run_id)
            runs.append(self._rec(names.runs, run_id.encode(), json.dumps(run).encode()))
            silent = workload.JUDGE_MODELS[i % 3] if self.silent_every and i % self.silent_every == 0 else None
            if silent:
                pub.stub_models[run_id] += 1
            for judge in workload.JUDGE_MODELS:
                if judge == silent:
                    continue
                doc = workload.judge_output(rng, run_id, judge, rubric_id=rid, submission_id=run["submission_id"])
                pub.outputs.add(doc["judge_run_id"])
                runs.append(self._rec(names.judge_outputs, run_id.encode(), json.dumps(doc).encode()))
        claims = []
        for c in range(self.claims):
            claim_id = f"{self.prefix}claim-{c:05d}"
            doc = workload.claim_check(rng, claim_id)
            pub.checks.add((claim_id, doc["judge_id"]))
            claims.append(self._rec(names.checks, claim_id.encode(), json.dumps(doc).encode()))
        bad = []
        for k in range(self.invalid):
            raw = MALFORMED[k % len(MALFORMED)] + (b" " * (k // len(MALFORMED)))  # distinct bytes, same defect
            pub.invalid[sha(raw)] += 1
            bad.append(self._rec(names.judge_outputs, f"bad-{k}".encode(), raw))
        # Interleave the three streams so every phase of a scenario sees all of them.
        streams = [runs, claims, bad]
        total = sum(len(s) for s in streams)
        positions = [0, 0, 0]
        for _ in range(total):
            pick = min((positions[i] / len(s) if s else 2.0, i) for i, s in enumerate(streams))[1]
            records.append(streams[pick][positions[pick]])
            positions[pick] += 1
        return records

    def _rec(self, topic: str, key: bytes | None, value: bytes) -> Record:
        self.pub.record(topic, value)
        return (topic, key, value)

    # -- processes --------------------------------------------------------------------------------------

    def worker(self, label: str = "w", *, bootstrap: str | None = None, **env: str) -> Worker:
        # A SIGKILLed worker holds its partitions until the group's session times
        # out; 10 s instead of Faust's 60 s keeps each recovery short.
        w = Worker(bootstrap or self.kafka, self.prefix, self.tmp / label, **{"JUDGEFLOW_SESSION_TIMEOUT": "10",
                   "JUDGEFLOW_REPLICATION_FACTOR": str(self.replication), **env})  # fmt: skip
        w.env["JUDGEFLOW_DATA_DIR"] = str(self.tmp / f"{label}-data")
        return w

    def projector(self, label: str = "p", *, database_url: str | None = None, **env: str) -> ProjectorProcess:
        return ProjectorProcess(self.kafka, self.prefix, self.tmp / label, database_url or self.database_url,
                                self.schema, **env)  # fmt: skip

    def send(self, records: list[Record]) -> None:
        produce(self.kafka, records, **(self.client if self.send_client is None else self.send_client))

    # -- waiting and checking ---------------------------------------------------------------------------

    def counts(self) -> tuple[int, int, int]:
        try:
            with psycopg.connect(self.database_url, autocommit=True, options=f"-c search_path={self.schema}",
                                 connect_timeout=3) as conn:  # fmt: skip
                row = conn.execute(
                    "SELECT (SELECT count(*) FROM evaluation_reconciled_scores WHERE finalized_at IS NOT NULL),"
                    " (SELECT count(DISTINCT claim_id) FROM routing_decisions WHERE subject = 'claim'),"
                    " (SELECT count(*) FROM invalid_events)"
                ).fetchone()
                return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)
        except psycopg.OperationalError:
            return (-1, -1, -1)

    def accounted(self) -> bool:
        return self.counts() == (self.runs, self.claims, self.invalid)

    def wait_accounted(self, timeout: float, *procs: Worker) -> float:
        """Wait until Postgres accounts for the whole workload; return time.monotonic() then."""
        timeout *= SOAK
        deadline = time.monotonic() + timeout
        while True:
            if self.accounted():
                # Counts can be complete before every row is (a claim's `checks` row is
                # made from its route until the check arrives): wait for the offsets too.
                ends = projected_topic_ends(self.kafka, self.names, **self.client)
                while not projection_reached(self.database_url, self.schema, ends):
                    if time.monotonic() > deadline:
                        raise AssertionError(f"projector not at the end offsets after {timeout}s")
                    time.sleep(0.2)
                return time.monotonic()
            for p in procs:
                if not p.alive():
                    raise AssertionError(f"{p.command[0]} died:\n{p.log()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"not accounted after {timeout}s: (final runs, routed claims, invalid) = "
                                     f"{self.counts()} of {(self.runs, self.claims, self.invalid)}")  # fmt: skip
            time.sleep(0.25)  # polling interval of the condition

    def check(self) -> tuple[list[TableCount], list[TopicCount], dict[str, int]]:
        names = self.names
        topics = [names.reconciled, names.done, names.second_judge, names.human_review, names.judge_outputs]
        records = asyncio.run(read_all(self.kafka, topics, **self.client))
        with psycopg.connect(self.database_url, autocommit=True, options=f"-c search_path={self.schema}") as conn:
            db = check_database(conn, names, self.pub)
        tc = check_topics(records, names)
        return db, tc, summary(db, tc)

    def verdict(self, name: str, recovery_s: float | None, **extra: Any) -> dict[str, Any]:
        """Check, assert nothing lost, duplicated or decided twice, and return the report row."""
        db, tc, totals = self.check()
        text = describe(db, tc)
        assert all(t.ok for t in db), f"{name}:\n{text}"
        assert totals["double_decisions"] == 0, f"{name}:\n{text}"
        return {
            "scenario": name,
            "events_published": self.pub.events,
            "faults": "; ".join(self.faults),
            **totals,
            "recovery_s": None if recovery_s is None else round(recovery_s, 1),
            **extra,
        }


def split(records: list[Any], parts: int) -> list[list[Any]]:
    size = -(-len(records) // parts)
    return [records[i : i + size] for i in range(0, len(records), size)]


def wait_progress(kafka: str, names: TopicNames, at_least: int, worker: Worker | None,
                  timeout: float = 120.0) -> None:  # fmt: skip
    """Wait until the routing and reconciliation topics hold `at_least` records."""
    consume_until(kafka, [names.done, names.second_judge, names.human_review, names.reconciled],
                  lambda rs: len(rs) >= at_least, timeout=timeout, worker=worker)  # fmt: skip
