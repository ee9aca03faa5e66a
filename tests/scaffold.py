"""One scaffold for the integration tests that run a worker and a projector on fresh topics and a fresh schema.

`Pipeline` is what such a test starts from: a topic prefix of its own with its `TopicNames`, the topics created,
and a schema of its own (migrated, or only named), dropped when the pipeline is closed. It hands out the
processes of `tests.support` (`Worker`, `ProjectorProcess`) on them, publishes, waits until the read models hold
everything published so far, and reads them back.

The `pipeline` fixture (tests/integration/conftest.py) builds one per test on the session's Kafka and Postgres
and closes it afterwards; a test that needs it built otherwise says so with a marker, e.g.
`@pytest.mark.pipeline(partitions=1)` or `@pytest.mark.pipeline(partitions=None, migrate=False)` (no topics,
no tables: the projector is to make them).
"""

from __future__ import annotations

import contextlib
import json
import random
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from judgeflow import workload
from projections.migrate import migrate as migrate_schema
from projections.projector import Projector
from streams.topics import TopicNames
from tests.support import (
    ProjectorProcess,
    Worker,
    create_topics,
    produce,
    project_to_end,
    projected_topic_ends,
    projection_reached,
    unique_prefix,
    wait_for,
)

Ends = dict[tuple[str, int], int]
"""End offsets per (topic, partition), as `projected_topic_ends` reads them."""


def schema_name(label: str = "t") -> str:
    """A schema name no other test uses."""
    return f"{label}_{uuid.uuid4().hex[:12]}"


def drop_schemas(database_url: str, *schemas: str) -> None:
    """DROP SCHEMA … CASCADE for each of `schemas` that exists."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        for name in schemas:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@contextlib.contextmanager
def fresh_schema(database_url: str, label: str = "t", *, migrate: bool = True) -> Iterator[str]:
    """A schema of its own (migrated unless `migrate` is false: then only its name), dropped afterwards."""
    name = schema_name(label)
    try:
        if migrate:
            migrate_schema(database_url, name)
        yield name
    finally:
        drop_schemas(database_url, name)


def claims(prefix: str, names: TopicNames, n: int, seed: int) -> list[tuple[str, bytes, bytes]]:
    """`n` claim checks for the checks topic, keyed `{prefix}c{i}`."""
    rng = random.Random(seed)
    return [(names.checks, f"{prefix}c{i}".encode(), json.dumps(workload.claim_check(rng, f"{prefix}c{i}")).encode())
            for i in range(n)]  # fmt: skip


class Pipeline:
    """A worker and a projector on fresh topics and a fresh schema.

    Built with a fresh topic prefix (`prefix`, `names`), its topics created with `partitions` partitions each
    (none created when `partitions` is None), and a fresh schema (`schema`), migrated unless `migrate` is false.
    `worker()` and `projector()` return unstarted `tests.support.Worker` / `ProjectorProcess` objects, context
    managers that start the process and stop it; each keeps its log in a folder of its own under `tmp`.
    `close()` (or leaving the `with` block) drops every schema the pipeline named.
    """

    def __init__(self, bootstrap: str, database_url: str, tmp: Path, *, partitions: int | None = 4,
                 migrate: bool = True) -> None:  # fmt: skip
        self.bootstrap = bootstrap
        self.database_url = database_url
        self.tmp = tmp
        self.prefix = unique_prefix()
        self.names = TopicNames.with_prefix(self.prefix)
        self.schemas: list[str] = []
        if partitions is not None:
            create_topics(bootstrap, self.names, partitions=partitions)
        self.schema = self.new_schema(migrate=migrate)

    def new_schema(self, label: str = "t", *, migrate: bool = True) -> str:
        """Another fresh schema on the same topics (migrated unless `migrate` is false), dropped with the rest."""
        name = schema_name(label)
        self.schemas.append(name)
        if migrate:
            migrate_schema(self.database_url, name)
        return name

    # The processes.

    def worker(self, label: str = "w", **env: str) -> Worker:
        """`judgeflow worker` on the pipeline's topics, its log and data under `tmp/label`; `env` overrides."""
        return Worker(self.bootstrap, self.prefix, self.tmp / label, **env)

    def projector(self, label: str = "p", *, schema: str | None = None, **env: str) -> ProjectorProcess:
        """`judgeflow projector` from the pipeline's topics into `schema` (the pipeline's own unless given),
        its log under `tmp/label`; `env` overrides."""
        return ProjectorProcess(self.bootstrap, self.prefix, self.tmp / label, self.database_url,
                                schema or self.schema, **env)  # fmt: skip

    def in_process_projector(self, **options: Any) -> Projector:
        """The projector as an object in this process (not started), in a consumer group of the pipeline's own."""
        return Projector(self.bootstrap, self.database_url, self.names, schema=self.schema,
                         group_id=f"g-{self.prefix}", **options)  # fmt: skip

    # Publishing and waiting.

    def send(self, records: Iterable[tuple[str, bytes | None, bytes]]) -> None:
        """Publish (topic, key, value) records; returns once the broker acknowledged every one."""
        produce(self.bootstrap, records)

    def ends(self) -> Ends:
        """End offsets of every topic the projector reads, right now."""
        return projected_topic_ends(self.bootstrap, self.names)

    def reached(self, ends: Ends, schema: str | None = None) -> bool:
        """True once the projector's stored offsets in `schema` reach `ends`."""
        return projection_reached(self.database_url, schema or self.schema, ends)

    def wait_projected(self, process: Worker | None, timeout: float, what: str = "projector at the end offsets", *,
                       ends: Ends | None = None, schema: str | None = None,
                       also: Callable[[], bool] | None = None) -> None:  # fmt: skip
        """Wait until everything published so far (or up to `ends`) is in the read models of `schema` (and `also()`
        holds, when given); fail after `timeout` seconds, or at once with its log when `process` died."""
        target = self.ends() if ends is None else ends
        wait_for(lambda: self.reached(target, schema) and (also is None or also()), timeout, what, process)

    def project_to_end(self, label: str = "p", timeout: float = 120.0) -> None:
        """Run a projector into the schema until every record published so far is in the read models."""
        project_to_end(self.bootstrap, self.prefix, self.tmp / label, self.database_url, self.schema, self.names,
                       timeout)  # fmt: skip

    # Reading the read models.

    def connect(self, schema: str | None = None, *, autocommit: bool = True, **kwargs: Any) -> psycopg.Connection:
        """A connection whose search_path is `schema` (the pipeline's own unless given), in autocommit mode
        unless `autocommit` is false; `kwargs` go to `psycopg.connect`."""
        return psycopg.connect(self.database_url, autocommit=autocommit,
                               options=f"-c search_path={schema or self.schema}", **kwargs)  # fmt: skip

    def count(self, query: str, schema: str | None = None) -> int:
        """The first value of `query`'s first row (0 without a row), or -1 while the database does not answer or
        the schema has no such table yet."""
        try:
            with self.connect(schema, connect_timeout=3) as conn:
                row = conn.execute(query).fetchone()
                return int(row[0]) if row else 0
        except (psycopg.OperationalError, psycopg.errors.UndefinedTable):
            return -1

    # Cleanup.

    def close(self) -> None:
        """Drop every schema the pipeline named (the processes are stopped by their own `with` blocks)."""
        drop_schemas(self.database_url, *self.schemas)

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
