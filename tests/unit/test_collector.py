"""The worker's young-generation threshold (`judgeflow.collector`)."""

from __future__ import annotations

import gc

from judgeflow.collector import YOUNG_THRESHOLD, set_young_threshold
from judgeflow.config import ConfigError, load_settings, validate


def test_the_threshold_is_set_and_zero_keeps_the_default() -> None:
    before = gc.get_threshold()
    try:
        assert set_young_threshold() is True
        assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])
        gc.set_threshold(*before)
        assert set_young_threshold(0) is False
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)


def test_the_setting_reads_from_the_environment_and_refuses_a_negative() -> None:
    assert load_settings({"JUDGEFLOW_GC_THRESHOLD": "5000"}).gc_threshold == 5000
    try:
        validate(load_settings({"JUDGEFLOW_GC_THRESHOLD": "-1"}))
    except ConfigError as exc:
        assert "JUDGEFLOW_GC_THRESHOLD" in str(exc)
    else:
        raise AssertionError("a negative threshold was accepted")
