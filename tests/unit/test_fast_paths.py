"""Fast paths of the claim step held equal to their reference paths (differential tests)."""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from judgeflow import workload
from schemas import RoutingDecision, parse_rubric
from streams.claims import ClaimStage
from streams.envelope import SourceRef
from streams.ids import NAMESPACE, event_id
from streams.stage import Inbound

RUBRIC = parse_rubric(workload.rubric())


@given(st.text(), st.lists(st.one_of(st.text(), st.integers(), st.none()), max_size=5))
def test_event_id_is_uuid5_of_step_and_identity(step: str, identity: list[object]) -> None:
    name = step + "|" + "|".join(str(p) for p in identity)
    try:
        expected = str(uuid.uuid5(NAMESPACE, name))
    except UnicodeEncodeError:  # lone surrogates: neither path can encode them
        return
    assert event_id(step, *identity) == expected


def test_constructed_decisions_are_the_bytes_a_validated_decision_gives() -> None:
    """`_decision` serialises a dict, no model built; every record must survive strict validation unchanged, for
    first verdicts and aggregates over several judges, with and without a rubric."""
    rng = random.Random(21)
    stage = ClaimStage(lambda rid: RUBRIC if rid == RUBRIC.rubric_version_id else None,
                       clock=lambda: datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC),
                       retention=timedelta(days=7), max_payload_bytes=1_000_000)  # fmt: skip
    states: dict[str, object] = {}
    routes = 0
    for n in range(3000):
        claim_id = f"claim-{rng.randrange(800)}"
        doc = workload.claim_check(rng, claim_id, judge_id=rng.choice(["j1", "j2", "j3", "j4"]),
                                   verdict=rng.choice(["pass", "fail", "unclear"]),
                                   confidence=rng.choice([0.0, 0.3, 0.5, 0.61, 0.9, 1.0]))  # fmt: skip
        if rng.random() < 0.3:
            doc.pop("rubric_version_id", None)
        else:
            doc["rubric_version_id"] = RUBRIC.rubric_version_id
        raw = json.dumps(doc).encode()
        step = stage.handle(Inbound("checks", claim_id.encode(), raw, SourceRef("checks", 0, n, claim_id.encode())),
                            states.get(claim_id))  # type: ignore[arg-type]  # fmt: skip
        if step.changed:
            states[claim_id] = step.state
        for record in step.records:
            if record.role in ("done", "second_judge", "human_review"):
                routes += 1
                assert RoutingDecision.model_validate_json(record.value).model_dump_json().encode() == record.value
    assert routes > 3000 * 0.9
