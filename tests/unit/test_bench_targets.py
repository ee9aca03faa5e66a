"""The bench's targets table: ratios from the result's keys, "report" rows, missing keys."""

from __future__ import annotations

from typing import Any

import pytest

from bench.runner import TARGETS, Target, evaluate_targets, table, target_cell


def _result(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "judgeflow_step_events_per_s": 1_000.0,
        "peer_events_per_s": 4_000.0,
        "faust_bare_step_events_per_s": 1_250.0,
        "pipeline_p99_ms_half_load": 420.0,
        "rss_mb_20k": 100.0,
        "rss_mb_200k": 112.0,
        "contract_fast_us_typical": 150.0,
        "contract_floor_us_typical": 120.0,
        "pipeline_events_per_s": 300.0,
        "ceiling_events_per_s": 4_800.0,
        "rdkafka_ceiling_events_per_s": 20_000.0,
        "bytewax_events_per_s": 8_000.0,
        "judgeflow_step_cpu_us_per_event": 120.0,
        "batched_rows_per_s": 18_000.0,
        "per_row_rows_per_s": 1_000.0,
    }
    return base | overrides


def test_issue_12_15_and_31_targets_and_goals() -> None:
    assert {name: (t.must, t.goal) for name, t in TARGETS.items()} == {
        "judgeflow_vs_peer": (">= 0.4", ">= 1.0"),
        "judgeflow_vs_bytewax": ("report", ">= 0.5"),
        "worker_cpu_us_per_claim": ("<= 90", "<= 36"),
        "judgeflow_vs_faust_bare": (">= 0.9", ">= 1.5"),
        "step_vs_rdkafka_ceiling": ("report", "report"),
        "pipeline_vs_rdkafka_ceiling": ("report", "report"),
        "pipeline_p99_ms_half_load": ("< 500", "< 100"),
        "rss_growth": ("<= 1.10", "<= 1.02"),
        "contract_typical_vs_floor": ("<= 1.5", "<= 1.2"),
        "pipeline_vs_ceiling": (">= 0.2", ">= 0.5"),
        "projector_vs_ceiling": (">= 0.3", ">= 1.0"),
        "batched_vs_per_row": (">= 20", ">= 50"),
    }


def test_ratios_are_taken_from_the_result_keys() -> None:
    got = evaluate_targets(_result())
    assert got["judgeflow_vs_peer"]["value"] == pytest.approx(0.25)
    assert got["judgeflow_vs_faust_bare"]["value"] == pytest.approx(0.8)
    assert got["pipeline_p99_ms_half_load"]["value"] == pytest.approx(420.0)
    # The issue's definition: a ratio of the two RSS figures, not the growth as a fraction.
    assert got["rss_growth"]["value"] == pytest.approx(1.12)
    assert got["contract_typical_vs_floor"]["value"] == pytest.approx(1.25)
    assert got["pipeline_vs_ceiling"]["value"] == pytest.approx(0.0625)
    assert got["pipeline_vs_rdkafka_ceiling"]["value"] == pytest.approx(0.015)
    assert got["judgeflow_vs_bytewax"]["value"] == pytest.approx(0.125)
    assert got["worker_cpu_us_per_claim"]["value"] == pytest.approx(120.0)
    assert got["worker_cpu_us_per_claim"]["met"] is False


def test_met_and_goal_met_follow_the_bounds() -> None:
    got = evaluate_targets(_result())
    assert (got["judgeflow_vs_peer"]["met"], got["judgeflow_vs_peer"]["goal_met"]) == (False, False)
    assert (got["judgeflow_vs_faust_bare"]["met"], got["judgeflow_vs_faust_bare"]["goal_met"]) == (False, False)
    assert (got["pipeline_p99_ms_half_load"]["met"], got["pipeline_p99_ms_half_load"]["goal_met"]) == (True, False)
    assert (got["rss_growth"]["met"], got["rss_growth"]["goal_met"]) == (False, False)
    assert (got["contract_typical_vs_floor"]["met"], got["contract_typical_vs_floor"]["goal_met"]) == (True, False)
    better = evaluate_targets(_result(judgeflow_step_events_per_s=4_000.0, rss_mb_200k=102.0,
                                      contract_fast_us_typical=144.0, pipeline_p99_ms_half_load=99.0))  # fmt: skip
    assert all(better[n]["met"] and better[n]["goal_met"] for n in
               ("judgeflow_vs_peer", "judgeflow_vs_faust_bare", "rss_growth", "contract_typical_vs_floor",
                "pipeline_p99_ms_half_load"))  # fmt: skip


@pytest.mark.parametrize(
    ("must", "value", "met"),
    [(">= 0.35", 0.35, True), (">= 0.35", 0.349, False), ("<= 1.10", 1.10, True), ("<= 1.10", 1.1001, False),
     ("< 500", 500.0, False), ("< 500", 499.9, True), ("> 2", 2.0, False), ("> 2", 2.1, True)],
)  # fmt: skip
def test_bounds_at_their_edges(must: str, value: float, met: bool) -> None:
    got = evaluate_targets({"x": value}, {"t": Target("x", None, must, must)})
    assert got["t"]["met"] is met


def test_report_rows_are_never_met_or_missed() -> None:
    report = {"r": Target("pipeline_events_per_s", "ceiling_events_per_s", "report", ">= 0.5")}
    got = evaluate_targets(_result(), report)["r"]
    assert got["met"] is None
    assert got["goal_met"] is False  # the goal (>= 0.5) is still judged
    assert target_cell(got) == "report"


def test_missing_keys_give_no_value_and_show_n_a() -> None:
    result = _result()
    del result["contract_floor_us_typical"]
    got = evaluate_targets(result)
    assert got["contract_typical_vs_floor"] == {"target": "<= 1.5", "goal": "<= 1.2", "value": None, "met": None,
                                                "goal_met": None}  # fmt: skip
    assert target_cell(got["contract_typical_vs_floor"]) == "<= 1.5 n/a"
    assert target_cell(got["judgeflow_vs_peer"]) == ">= 0.4 MISSED"
    assert target_cell(got["pipeline_p99_ms_half_load"]) == "< 500 met"
    none_at_all = evaluate_targets({})
    assert all(entry["value"] is None and entry["met"] is None for entry in none_at_all.values())


def test_a_zero_denominator_is_no_value_not_a_crash() -> None:
    got = evaluate_targets(_result(faust_bare_step_events_per_s=0.0))
    assert got["judgeflow_vs_faust_bare"]["value"] is None


def _full_result(**overrides: Any) -> dict[str, Any]:
    result = _result(**overrides)
    result.update(
        judgeflow_step_2_workers_events_per_s=700.0, pipeline_p50_ms=10.0, pipeline_p95_ms=20.0, pipeline_p99_ms=30.0,
        pipeline_half_load_events_per_s=150.0, pipeline_p50_ms_half_load=5.0, pipeline_p95_ms_half_load=9.0,
        by_output_size=[{"size": "typical", "bytes": 5432, "parse_us": 150.0, "parse_per_s": 6666.0,
                         "worker_us": 900.0, "rows": 45}],
        workload={"memory_small": 20_000, "memory_large": 200_000, "memory_store": "rocksdb://",
                  "step_events": 100_000, "ceiling_events": 20_000},
        projector_events_per_s=2_000.0, projector_2_events_per_s=3_000.0, projector_tables={},
        peer_cpu_us_per_event=40.0, faust_bare_step_cpu_us_per_event=200.0, bytewax_cpu_us_per_event=20.0,
        rdkafka_ceiling_cpu_us_per_event=5.0, aiokafka_passthrough_cpu_us_per_event=20.0,
        aiokafka_passthrough_events_per_s=9_000.0,
        judgeflow_step_2_workers_cpu_us_per_event=130.0,
    )  # fmt: skip
    result["targets"] = evaluate_targets(result)
    ratios = {name: e["value"] for name, e in result["targets"].items() if e["value"] is not None}
    result["ratios"] = {"two_vs_one_worker": 0.7, "faust_bare_vs_peer": 0.3125, "two_vs_one_projector": 1.5} | ratios
    return result


def _cells(result: dict[str, Any]) -> list[list[str]]:
    t = table(result)
    return [[str(cell) for cell in column._cells] for column in t.columns]


def test_table_prints_the_goal_column_and_n_a_without_a_floor() -> None:
    with_floor = _cells(_full_result())
    assert [c.header for c in table(_full_result()).columns][-1] == "goal"
    goals = with_floor[-1]
    for goal in (">= 1.0", ">= 1.5", "< 100", "<= 1.02", "<= 1.2", ">= 0.5"):
        assert goal in goals
    assert "1.12x" in with_floor[2]
    result = _full_result()
    del result["contract_floor_us_typical"]
    result["targets"] = evaluate_targets(result)
    del result["ratios"]["contract_typical_vs_floor"]
    targets_column = _cells(result)[3]
    assert "<= 1.5 n/a" in targets_column


def _labels_and_values(result: dict[str, Any]) -> dict[str, str]:
    columns = _cells(result)
    return dict(zip(columns[0], columns[1], strict=True))


def test_half_load_rows_show_p50_p99_and_max_of_both_latencies() -> None:
    result = _full_result(pipeline_p99_ms_half_load=420.0)
    result.update(
        pipeline_half_load_input_s=29.98, pipeline_max_ms_half_load=610.0, pipeline_decision_p50_ms_half_load=7.0,
        pipeline_decision_p99_ms_half_load=440.0, pipeline_decision_max_ms_half_load=1_234.0,
    )  # fmt: skip
    rows = _labels_and_values(result)
    latency = next(label for label in rows if label.strip().startswith("latency p50 / p99 / max at 150 ev/s"))
    assert "warmed topics, 30 s of input" in latency
    assert "under" not in latency
    assert rows[latency] == "5 / 420 / 610 ms"
    decision = next(label for label in rows if label.strip().startswith("decision latency p50 / p99 / max"))
    assert rows[decision] == "7 / 440 / 1,234 ms"
    targets = dict(zip(_cells(result)[0], _cells(result)[3], strict=True))
    assert targets[latency] == "< 500 met"
    assert targets[decision] == ""


def test_a_half_load_pass_shorter_than_30_s_says_so() -> None:
    result = _full_result()
    result.update(
        pipeline_half_load_input_s=10.0, pipeline_max_ms_half_load=610.0, pipeline_decision_p50_ms_half_load=7.0,
        pipeline_decision_p99_ms_half_load=440.0, pipeline_decision_max_ms_half_load=1_234.0,
    )  # fmt: skip
    latency = next(label for label in _labels_and_values(result) if "p50 / p99 / max at" in label)
    assert "10 s of input, under 30 s" in latency


def test_results_from_before_the_warmed_pass_show_what_they_have() -> None:
    rows = _labels_and_values(_full_result())  # no `pipeline_max_ms_half_load`, no decision keys
    latency = next(label for label in rows if "p50 / p95 / p99 at 150 ev/s" in label)
    assert rows[latency] == "5 / 9 / 420 ms"
    assert not any("decision latency" in label for label in rows)


def test_step_rows_show_each_engine_with_its_cpu_and_say_when_quick() -> None:
    rows = _labels_and_values(_full_result())
    judgeflow = next(label for label in rows if label.startswith("judgeflow: same claim step, 1 worker"))
    assert "100,000-check backlog" in judgeflow
    assert rows[judgeflow] == "1,000 ev/s, 120.0 us CPU/ev"
    assert any(label.startswith("peer: claim step on Bytewax") for label in rows)
    targets = dict(zip(_cells(_full_result())[0], _cells(_full_result())[3], strict=True))
    assert targets[judgeflow] == "<= 90 MISSED"
    quick = _full_result(step_comparable=False)
    assert all("not comparable" in label for label in _labels_and_values(quick) if "backlog" in label)
