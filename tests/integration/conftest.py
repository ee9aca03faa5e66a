"""Fixtures shared by the integration tests: a fresh schema, and a whole pipeline (tests/scaffold.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.scaffold import Pipeline, fresh_schema


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "pipeline(partitions=4, migrate=True): how the `pipeline` fixture builds its Pipeline"
    )


@pytest.fixture
def schema(database_url: str) -> Iterator[str]:
    """A freshly migrated schema of its own, dropped afterwards."""
    with fresh_schema(database_url) as name:
        yield name


@pytest.fixture
def pipeline(
    request: pytest.FixtureRequest, kafka_bootstrap: str, database_url: str, tmp_path: Path
) -> Iterator[Pipeline]:
    """Fresh topics (4 partitions each) and a freshly migrated schema on the session's Kafka and Postgres, the
    schema dropped afterwards; `@pytest.mark.pipeline(partitions=…, migrate=…)` builds it otherwise."""
    marker = request.node.get_closest_marker("pipeline")
    with Pipeline(kafka_bootstrap, database_url, tmp_path, **(marker.kwargs if marker else {})) as built:
        yield built
