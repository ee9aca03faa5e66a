"""The soak's steady load: the real mix of judgeflow's traffic, one deterministic unit at a time, and the
ledger of what was sent when (for latencies) and what was published (for the final accounting).

A unit `i` is one first-judge claim check; every third unit adds an evaluation run with three judges' outputs;
every fifth a second judge's check of the previous claim; every twentieth a review of a claim two back; every
fiftieth a malformed event on judge.outputs (bytes that are not JSON, or JSON cut short). 2.6 events per unit
on average.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from bench.accounting import Published, sha
from judgeflow import workload
from streams.topics import TopicNames

EVENTS_PER_UNIT = 1 + 4 / 3 + 1 / 5 + 1 / 20 + 1 / 50
SECOND_JUDGE = "faithfulness-judge-v2"


@dataclass(frozen=True)
class Event:
    """One record to publish, and what it stands for: `kind` and `ident` key the latency ledger."""

    topic: str
    key: bytes
    value: bytes
    kind: str  # check | second | review | run | output | malformed
    ident: str  # claim_id, evaluation_run_id, or "" for a malformed event


class Mix:
    """The units of the soak's load, the same for the same seed."""

    def __init__(self, names: TopicNames, seed: int) -> None:
        self.names = names
        self.seed = seed
        self.rubric = workload.rubric(workload.stable_id("soak-rubric", seed))
        self.rubric_id = self.rubric["rubric_version_id"]

    def claim_id(self, i: int) -> str:
        return f"soak{self.seed}-c{i}"

    def rubric_event(self) -> Event:
        return Event(self.names.rubrics, self.rubric_id.encode(), json.dumps(self.rubric).encode(), "rubric", "")

    def unit(self, i: int) -> list[Event]:
        rng = random.Random(self.seed * 1_000_003 + i)
        names, out = self.names, []
        claim = self.claim_id(i)
        check = workload.claim_check(rng, claim)
        out.append(Event(names.checks, claim.encode(), json.dumps(check).encode(), "check", claim))
        if i % 3 == 0:
            out += self._run(rng, i)
        if i % 5 == 1 and i > 0:
            prev = self.claim_id(i - 1)
            second = workload.claim_check(rng, prev, judge_id=SECOND_JUDGE)
            out.append(Event(names.checks, prev.encode(), json.dumps(second).encode(), "second", prev))
        if i % 20 == 2:
            out.append(
                Event(
                    names.reviews,
                    self.claim_id(i - 2).encode(),
                    json.dumps(self._review(i - 2)).encode(),
                    "review",
                    self.claim_id(i - 2),
                )
            )
        if i % 50 == 3:
            out.append(self._malformed(i))
        return out

    def _run(self, rng: random.Random, i: int) -> list[Event]:
        run_id = workload.stable_id("soak-run", self.seed, i)
        run = workload.evaluation_run(run_id, rubric_id=self.rubric_id, timeout_s=3600.0)
        run["started_at"] = workload.iso(workload.datetime.now(workload.UTC))  # its judges' deadline is ahead
        events = [Event(self.names.runs, run_id.encode(), json.dumps(run).encode(), "run", run_id)]
        for judge in workload.JUDGE_MODELS:
            doc = workload.judge_output(
                rng, run_id, judge, rubric_id=self.rubric_id, submission_id=run["submission_id"]
            )
            value = json.dumps(doc).encode()
            events.append(Event(self.names.judge_outputs, run_id.encode(), value, "output", run_id))
        return events

    def _review(self, i: int) -> dict[str, Any]:
        return {
            "schema_version": "1.0",
            "review_id": workload.stable_id("soak-review", self.seed, i),
            "claim_id": self.claim_id(i),
            "reviewer": "soak-reviewer",
            "final_verdict": "pass",
            "notes": None,
            "created_at": "2026-12-06T00:00:00Z",
        }

    def _malformed(self, i: int) -> Event:
        """Bytes no contract accepts, distinct per unit, dead-lettered with a code and counted in the accounting."""
        raw = (b"not json %d" if i % 100 == 3 else b'{"schema_version": "2.1", "judge_run_id": %d,') % i
        return Event(self.names.judge_outputs, f"bad-{i}".encode(), raw, "malformed", "")


@dataclass
class Ledger:
    """What the broker acknowledged, as the final accounting expects it (`bench.accounting.Published`)."""

    published: Published = field(default_factory=Published)
    counts: dict[str, int] = field(default_factory=dict)

    def acked(self, event: Event) -> None:
        self.published.record(event.topic, event.value)
        self.counts[event.kind] = self.counts.get(event.kind, 0) + 1
        if event.kind in ("check", "second"):
            doc = json.loads(event.value)
            self.published.checks.add((doc["claim_id"], doc["judge_id"]))
        elif event.kind == "run":
            self.published.runs.add(event.ident)
        elif event.kind == "output":
            self.published.outputs.add(json.loads(event.value)["judge_run_id"])
        elif event.kind == "malformed":
            self.published.invalid[sha(event.value)] += 1
