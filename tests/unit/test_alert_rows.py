"""Stale-work alerts (`judgeflow.alerts`) -> `stale_alerts` rows: the pure mapping, no database."""

from __future__ import annotations

import uuid

from projections.projector import PROJECTED_ROLES, Projector
from projections.rows import Record, Rows, project
from schemas import StaleWorkAlert
from streams.topics import TopicNames

NAMES = TopicNames.with_prefix("t-alerts.")
ROLES = {getattr(NAMES, r): r for r in PROJECTED_ROLES}
RUN = "0b7e3f7a-5c1d-4e2f-8a9b-1c2d3e4f5a6b"


def alert(**overrides: object) -> StaleWorkAlert:
    fields: dict[str, object] = {
        "event_id": str(uuid.uuid5(uuid.NAMESPACE_URL, "run_overdue/" + RUN)),
        "kind": "run_overdue",
        "subject": "evaluation_run",
        "subject_id": RUN,
        "waiting_for": "judges",
        "rubric_version_id": "5d1c7c1e-2b3a-4c5d-9e8f-7a6b5c4d3e2f",
        "held_events": 0,
        "first_seen_at": "2026-03-31T12:00:00Z",
        "deadline": "2026-03-31T12:05:00Z",
        "reason": "not final 300s after its deadline: 1 of 3 judges in",
        "raised_at": "2026-03-31T12:10:00+00:00",
        **overrides,
    }
    return StaleWorkAlert.model_validate(fields)


def record(a: StaleWorkAlert | None, offset: int = 7, partition: int = 2) -> Record:
    value = None if a is None else a.model_dump_json().encode()
    key = None if a is None else a.subject_id.encode()
    return Record(NAMES.alerts, partition, offset, key, value, (), 1_774_958_400_000 + offset)


def rows_of(*records: Record) -> Rows:
    rows = Rows()
    for r in records:
        project(r, NAMES, ROLES, rows)
    return rows


def test_an_overdue_run_becomes_one_row_with_every_field_and_its_coordinates() -> None:
    a = alert()
    rows = rows_of(record(a))
    assert dict(rows.tables) == {"stale_alerts": [(
        a.event_id, "run_overdue", "evaluation_run", RUN, "judges", "5d1c7c1e-2b3a-4c5d-9e8f-7a6b5c4d3e2f", 0,
        "2026-03-31T12:00:00Z", "2026-03-31T12:05:00Z", "not final 300s after its deadline: 1 of 3 judges in",
        "2026-03-31T12:10:00Z", "1.0", NAMES.alerts, 2, 7, record(a).at,  # normalised to UTC text
    )]}  # fmt: skip
    # An alert is not a decision and not a run: no derived rows to refresh, no placeholders.
    assert rows.runs == set() and rows.claims == set()


def test_a_claim_held_for_its_rubric_keeps_its_nulls() -> None:
    a = alert(kind="held_too_long", subject="claim", subject_id="claim-17", waiting_for="rubric", held_events=3,
              deadline=None, reason="3 events held 120s waiting for rubric")  # fmt: skip
    [row] = rows_of(record(a)).tables["stale_alerts"]
    assert row[1:9] == ("held_too_long", "claim", "claim-17", "rubric", a.rubric_version_id, 3,
                        "2026-03-31T12:00:00Z", None)  # fmt: skip


def test_a_redelivery_maps_to_the_same_event_id_so_the_insert_skips_it() -> None:
    a = alert()
    first, again = rows_of(record(a, offset=7), record(a, offset=9)).tables["stale_alerts"]
    assert first[0] == again[0] == a.event_id
    assert first[:12] == again[:12]  # only where it was read differs


def test_a_tombstone_on_the_alerts_topic_writes_nothing() -> None:
    assert rows_of(record(None)).count() == 0


def test_the_projector_and_rebuild_subscribe_to_the_alerts_topic() -> None:
    assert "alerts" in PROJECTED_ROLES  # rebuild replays the same role list
    assert NAMES.alerts in Projector("localhost:9092", "postgresql://unused", NAMES).topics
