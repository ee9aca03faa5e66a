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


_VERDICTS = st.sampled_from(["pass", "fail", "unclear"])
_UNIT = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
_POLICIES = st.fixed_dictionaries(
    {"pass_score": _UNIT, "floor": _UNIT, "border": _UNIT, "spot_sample_rate": st.sampled_from([0.0, 0.1, 0.5, 1.0])}
).filter(lambda p: p["border"] <= p["pass_score"])


@given(
    verdict=_VERDICTS,
    score=st.one_of(st.none(), _UNIT),
    confidence=_UNIT,
    policy=st.one_of(st.none(), _POLICIES),
    retention_s=st.sampled_from([-5.0, 0.0, 1.0, 7 * 24 * 3600.0]),
    partition=st.integers(0, 11),
    timestamp=st.one_of(st.none(), st.floats(0, 2e9)),
    rekeyed=st.booleans(),
    claim=st.text(alphabet="abc-_0123456789", min_size=1, max_size=12),
)
def test_a_first_check_takes_the_direct_path_to_the_reference_result(
    verdict: str,
    score: float | None,
    confidence: float,
    policy: dict[str, float] | None,
    retention_s: float,
    partition: int,
    timestamp: float | None,
    rekeyed: bool,
    claim: str,
) -> None:
    """`ClaimStage._first_check` (no state model) against every check through `on_check` / `_observe` /
    `_keep`: the same records, byte for byte, the same stored state, the same drift observations."""
    from streams.drift import DriftAccumulator, DriftOptions

    rubric = None if policy is None else parse_rubric(workload.rubric(workload.stable_id("r", claim), routing=policy))
    doc = workload.claim_check(random.Random(claim), claim, verdict=verdict, confidence=confidence)
    doc["score"] = score
    if rubric is not None:
        doc["rubric_version_id"] = rubric.rubric_version_id
    raw = json.dumps(doc).encode()
    headers = {"judgeflow-source": f"checks:{partition}:9".encode()} if rekeyed else {}
    record = Inbound("checks_rekeyed" if rekeyed else "checks", claim.encode(), raw,
                     SourceRef("checks_rekeyed" if rekeyed else "checks", partition, 7, claim.encode()),
                     headers, timestamp)  # fmt: skip
    now = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)
    results = []
    taken = []
    for direct in (True, False):
        drift = DriftAccumulator(DriftOptions())
        stage = ClaimStage(lambda rid: rubric if rubric and rid == rubric.rubric_version_id else None,
                           clock=lambda: now, retention=timedelta(seconds=retention_s), max_payload_bytes=1_000_000,
                           drift=drift, direct_first_checks=direct)  # fmt: skip
        first_check = stage._first_check
        stage._first_check = lambda *a, _f=first_check, _d=direct: taken.append(_d) or _f(*a)  # type: ignore[method-assign]
        step = stage.handle(record, None)
        results.append((step, dict(drift.checks), dict(drift.max_at)))
    (fast, _, _), (ref, _, _) = results
    if any(r.role == "invalid" for r in ref.records):  # refused by the contract (e.g. a pass without a score)
        assert taken == []
    else:
        assert taken == [True]  # the direct path ran, and only where it is on
    (fast, fast_checks, fast_at), (ref, ref_checks, ref_at) = results
    assert fast.records[-1].role in ("done", "second_judge", "human_review")  # decided, not refused
    assert fast.records == ref.records
    assert (fast.state, fast.changed, fast.late) == (ref.state, ref.changed, ref.late)
    assert (fast_checks, fast_at) == (ref_checks, ref_at)


_DIGITS = st.text(alphabet="0123456789", min_size=1, max_size=8)


@given(
    st.one_of(
        st.builds(
            lambda y, mo, d, h, mi, s, f, z: f"{y}-{mo}-{d}T{h}:{mi}:{s}{f}{z}",
            _DIGITS, _DIGITS, _DIGITS, _DIGITS, _DIGITS, _DIGITS,
            st.one_of(st.just(""), _DIGITS.map(lambda d: "." + d)), st.sampled_from(["Z", "z", "+00:00", "-01:30"]),
        ),
        st.datetimes().map(lambda t: t.isoformat() + "Z"),
        st.text(max_size=40),
    )
)  # fmt: skip
def test_canonical_timestamps_take_a_short_path_to_the_same_text(value: str) -> None:
    """`_check_timestamp` returns canonical text as it is: the same text, or the same error, as the general path."""
    from schemas.types import _check_timestamp, _general_timestamp

    def outcome(check: object) -> tuple[str, str]:
        try:
            return "ok", check(value)  # type: ignore[operator]
        except Exception as exc:  # noqa: BLE001 - the error's kind and words are what is compared
            return type(exc).__name__, str(exc)

    assert outcome(_check_timestamp) == outcome(_general_timestamp)


def test_a_check_whose_rubric_is_unknown_takes_the_reference_path_and_is_held() -> None:
    stage = ClaimStage(lambda _rid: None, clock=lambda: datetime(2026, 12, 1, tzinfo=UTC),
                       retention=timedelta(days=7), max_payload_bytes=1_000_000)  # fmt: skip
    stage._first_check = lambda *a: (_ for _ in ()).throw(AssertionError("direct path taken"))  # type: ignore[method-assign]
    doc = workload.claim_check(random.Random(5), "claim-held")
    doc["rubric_version_id"] = workload.stable_id("rubric", "not-yet")
    step = stage.handle(Inbound("checks", b"claim-held", json.dumps(doc).encode(),
                                SourceRef("checks", 0, 1, b"claim-held")), None)  # fmt: skip
    assert step.records == [] and step.state is not None and step.state["waiting_for"] == "rubric"
