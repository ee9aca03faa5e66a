"""Fixtures shared by the integration tests that read the projected schema."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from projections.migrate import migrate


@pytest.fixture
def schema(database_url: str) -> Iterator[str]:
    """A freshly migrated schema of its own, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    migrate(database_url, name)
    yield name
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
