"""The Kafka ACLs a deployment needs: one principal per process, each with only what it uses.

One plan serves three readers: `judgeflow acl` prints it as `kafka-acls.sh` commands for the
admin of a managed cluster, `judgeflow services up --secure` applies it to the local broker, and
each process checks its own part at start (`judgeflow.kafka_access`). The worker's topics come
from its wired topology, so an agent that starts writing a new topic needs a new ACL here
without anyone editing a list.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from projections.projector import PROJECTED_ROLES
from streams.topics import TopicNames

ROLES = ("worker", "projector", "judge", "desk", "analyst")
"""The processes that need their own principal. `judge` is a judge producer (`judgeflow produce`),
`analyst` a `judgeflow tail` of the routing topics."""

JUDGE_ROLES = ("rubrics", "runs", "judge_outputs", "checks")
DESK_ROLES = ("reviews",)
ANALYST_ROLES = ("done", "second_judge", "human_review")


@dataclass(frozen=True, order=True)
class Grant:
    """One allowed operation on one resource: what `kafka-acls.sh --add` takes."""

    principal: str  # "User:worker"
    resource: str  # "topic" | "group"
    name: str
    operation: str  # Kafka's name: Read, Write, Describe, Create


@dataclass(frozen=True)
class Needs:
    """What one process uses: it checks exactly these at start."""

    role: str
    principal: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    group: str | None = None
    owns: tuple[str, ...] = ()  # topics it creates and keeps (Faust's changelogs)

    def grants(self) -> list[Grant]:
        out = []
        for topic in self.reads:
            out += [Grant(self.principal, "topic", topic, op) for op in ("Read", "Describe")]
        for topic in self.writes:
            out += [Grant(self.principal, "topic", topic, op) for op in ("Write", "Describe")]
        if self.group:
            out.append(Grant(self.principal, "group", self.group, "Read"))
        for topic in self.owns:
            out += [Grant(self.principal, "topic", topic, op) for op in ("Create", "Describe", "Read", "Write")]
        return sorted(set(out))


def worker_topics(names: TopicNames, app_id: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The topics the wired worker reads, writes and owns (its tables' changelogs), from its own topology.

    The changelogs are granted by name, not as the prefix `<app id>-`: a prefix would also match another
    deployment whose app id or topic prefix starts with this app id (`judgeflow` and `judgeflow-prod`)."""
    from judgeflow.config import Settings
    from judgeflow.worker import build_worker

    app = build_worker(Settings(topic_prefix=_prefix_of(names), app_id=app_id))
    by_role = names.all()
    reads: set[str] = set()
    writes: set[str] = set()
    for node in app.topology:  # type: ignore[attr-defined]
        reads.update(by_role[r] for r in node.reads)
        writes.update(by_role[r] for r in node.writes)
    owns = {table.changelog_topic.get_topic_name() for table in app.tables.values()}
    return tuple(sorted(reads)), tuple(sorted(writes)), tuple(sorted(owns))


def _prefix_of(names: TopicNames) -> str:
    return names.runs[: -len(TopicNames().runs)]


def needs_of(role: str, app_id: str, topic_prefix: str, principal: str | None = None) -> Needs:
    """One role's needs for a deployment (its app id and topic prefix); `principal` defaults to
    `User:<role>`."""
    names = TopicNames.with_prefix(topic_prefix)
    topic = names.all()
    who = principal or f"User:{role}"
    if role == "worker":
        reads, writes, owns = worker_topics(names, app_id)
        return Needs(role, who, reads, writes, group=app_id, owns=owns)
    if role == "projector":
        return Needs(role, who, tuple(topic[r] for r in PROJECTED_ROLES), group=f"{app_id}-projector")
    if role == "judge":
        return Needs(role, who, writes=tuple(topic[r] for r in JUDGE_ROLES))
    if role == "desk":
        return Needs(role, who, writes=tuple(topic[r] for r in DESK_ROLES))
    if role == "analyst":
        return Needs(role, who, reads=tuple(topic[r] for r in ANALYST_ROLES))
    raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")


def plan(app_id: str, topic_prefix: str, principals: Mapping[str, str] | None = None) -> list[Needs]:
    """Every role's needs; `principals` maps a role to its principal (default `User:<role>`)."""
    return [needs_of(role, app_id, topic_prefix, (principals or {}).get(role)) for role in ROLES]


def kafka_acls_commands(needs: Iterable[Needs], bootstrap: str = "$BOOTSTRAP") -> list[str]:
    """`kafka-acls.sh` lines, one per principal and resource, operations together."""
    lines = []
    for need in needs:
        lines.append(f"# {need.role}")
        by_resource: dict[tuple[str, str], list[str]] = {}
        for g in need.grants():
            by_resource.setdefault((g.resource, g.name), []).append(g.operation)
        for (resource, name), ops in by_resource.items():
            flags = " ".join(f"--operation {op}" for op in ops)
            lines.append(
                f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config admin.properties --add "
                f"--allow-principal {shlex.quote(need.principal)} {flags} --{resource} {shlex.quote(name)}"
            )
    return lines


def as_json_text(needs: Iterable[Needs]) -> str:
    return json.dumps([asdict(g) for n in needs for g in n.grants()], indent=2)


def fix_hint(grant: Grant) -> str:
    """What to run to allow one missing operation (the end of a refusal's one line)."""
    return (
        f"add ACL: kafka-acls.sh --add --allow-principal {shlex.quote(grant.principal)} "
        f"--operation {grant.operation} --{grant.resource} {shlex.quote(grant.name)}"
    )
