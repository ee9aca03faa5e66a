"""Child row ids: deterministic, distinct per kind and position, valid version-5 uuids under their output's prefix."""

from __future__ import annotations

import uuid

from projections.rows import DIMENSION, DIMENSION_REF, LANE, ROW_NS, TELEMETRY, _json_or_none, child_id


def test_child_ids_are_distinct_deterministic_and_keep_the_parent_prefix() -> None:
    parent = uuid.uuid5(ROW_NS, "judge_output/x")
    ids = [child_id(parent, LANE, li) for li in range(5)]
    ids += [child_id(parent, DIMENSION, li, di) for li in range(5) for di in range(6)]
    ids += [child_id(parent, DIMENSION_REF, li, di, r) for li in range(5) for di in range(6) for r in range(3)]
    ids.append(child_id(parent, TELEMETRY))
    assert len(set(ids)) == len(ids)
    assert ids == [child_id(parent, LANE, li) for li in range(5)] + ids[5:]
    for i in ids:
        assert i.version == 5 and i.variant == uuid.RFC_4122
        assert i.int >> 48 == parent.int >> 48
    other = uuid.uuid5(ROW_NS, "judge_output/y")
    assert child_id(other, LANE, 0) != child_id(parent, LANE, 0)


def test_positions_past_the_field_widths_fall_back_to_a_distinct_uuid5() -> None:
    parent = uuid.uuid5(ROW_NS, "judge_output/x")
    far = child_id(parent, DIMENSION_REF, 1, 2, 70_000)
    assert far == child_id(parent, DIMENSION_REF, 1, 2, 70_000) and far.version == 5
    assert far not in {child_id(parent, DIMENSION_REF, 1, 2, c) for c in range(65_536)}


def test_value_json_is_the_events_own_text_only_for_objects_jsonb_can_hold() -> None:
    assert _json_or_none(b'{"a": 1.50, "b": [1, 2]}') == '{"a": 1.50, "b": [1, 2]}'
    for refused in (b"[1, 2]", b'{"a": NaN}', b'{"a": "\\ud800"}', b'{"a": "\\u0000"}', b"{not json", b"\xff{}", None):
        assert _json_or_none(refused) is None, refused
