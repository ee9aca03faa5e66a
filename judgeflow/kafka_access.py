"""Before a process starts its Kafka clients: can it connect, and may it do what it needs?

aiokafka reports a wrong password, an untrusted certificate or a plaintext client on a TLS port
as "Unable to bootstrap" after its retries, and a missing ACL only when the first record is
sent or fetched, deep inside Faust. This check asks once, at start, with librdkafka's admin
client (confluent-kafka), which names the cause: the handshake's own error, and for every
topic and group the operations the broker authorizes for this principal (KIP-430). A refusal
becomes one line that names the principal, the operation and the resource, and what to add:

    User:worker may not Write routing.done: add ACL: kafka-acls.sh --add ...

A broker that does not answer is not a refusal: the process starts and its own outage
handling reports and retries as before.
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from typing import Any

from judgeflow.acl import Grant, Needs, fix_hint
from judgeflow.config import KafkaSecurity

log = logging.getLogger("judgeflow.kafka_access")
_QUIET = logging.getLogger("judgeflow.kafka_access.librdkafka")
_QUIET.setLevel(logging.CRITICAL)


class AccessRefused(RuntimeError):
    """The broker refused this process: the message is the one line to show."""


def principal_of(security: KafkaSecurity) -> str:
    if security.sasl_mechanism and security.sasl_username:
        return f"User:{security.sasl_username}"
    return "User:ANONYMOUS"


def librdkafka_config(bootstrap: str, security: KafkaSecurity) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "security.protocol": security.security_protocol.lower(),
        # The errors come back through error_cb, once, as this module words them; librdkafka's own
        # lines (its retries) go to a logger that shows only critical ones.
        "log_level": 0,
        "logger": _QUIET,
    }
    if security.sasl_mechanism:
        config.update(
            {
                "sasl.mechanism": security.sasl_mechanism,
                "sasl.username": security.sasl_username or "",
                "sasl.password": security.sasl_password or "",
            }
        )
    if security.ssl_cafile:
        config["ssl.ca.location"] = security.ssl_cafile
    if security.ssl_certfile:
        config["ssl.certificate.location"] = security.ssl_certfile
    if security.ssl_keyfile:
        config["ssl.key.location"] = security.ssl_keyfile
    return config


def check_access(bootstrap: str, security: KafkaSecurity, needs: Needs, timeout: float = 5.0) -> bool:
    """Raise `AccessRefused` with one line if the broker refuses this principal or an operation in
    `needs`; True when everything was confirmed, False when the broker did not answer in time."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    errors: list[Any] = []
    admin = AdminClient({**librdkafka_config(bootstrap, security), "error_cb": errors.append})
    principal = needs.principal
    cluster = admin.describe_cluster(request_timeout=timeout)
    deadline = time.monotonic() + timeout
    while not cluster.done():
        admin.poll(0.05)
        while errors:
            _refuse_on_connect_error(errors.pop(0), bootstrap, security, principal)
        if time.monotonic() > deadline:
            log.warning("Kafka at %s did not answer within %gs; starting anyway", bootstrap, timeout)
            return False
    try:
        cluster.result()
    except Exception as exc:
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if err is not None:
            _refuse_on_connect_error(err, bootstrap, security, principal)
        log.warning("Kafka at %s: %s; starting anyway", bootstrap, exc)
        return False
    _check_topics(admin, needs, timeout)
    if needs.group:
        _check_group(admin, needs, timeout)
    return True


def _refuse_on_connect_error(err: Any, bootstrap: str, security: KafkaSecurity, principal: str) -> None:
    from confluent_kafka import KafkaError

    code, text = err.code(), err.str()
    if code in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
        raise AccessRefused(
            f"Kafka at {bootstrap} refused {principal} ({security.sasl_mechanism}): wrong password or unknown "
            f"user (check KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD[_FILE])"
        )
    if code == KafkaError._SSL:
        raise AccessRefused(f"TLS to Kafka at {bootstrap} failed: {_tls_reason(bootstrap, security, text)}")
    unreachable = code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
    if unreachable and not security.security_protocol.endswith("SSL") and _speaks_tls(bootstrap):
        raise AccessRefused(
            f"Kafka at {bootstrap} expects TLS but this client connects with {security.security_protocol}: "
            "set KAFKA_SECURITY_PROTOCOL (e.g. SASL_SSL) and KAFKA_SSL_CAFILE"
        )


def _tls_reason(bootstrap: str, security: KafkaSecurity, text: str) -> str:
    """Why the handshake failed, and what to check. librdkafka says only "certificate verify failed", so
    the handshake is repeated with Python's ssl and the same CA, whose error names the cause."""
    host, port = _first(bootstrap)
    context = security.aiokafka_kwargs().get("ssl_context") or ssl.create_default_context()
    try:
        with socket.create_connection((host, port), 5) as raw, context.wrap_socket(raw, server_hostname=host):
            pass
    except ssl.SSLCertVerificationError as exc:
        reason = (exc.verify_message or "").lower()
        if "expired" in reason:
            return "the broker's certificate has expired"
        if "not yet valid" in reason:
            return "the broker's certificate is not valid yet"
        if "hostname" in reason or "ip address mismatch" in reason:
            return f"the broker's certificate does not name {host}"
        return f"the broker's certificate is not signed by a trusted CA ({exc.verify_message}; check KAFKA_SSL_CAFILE)"
    except (OSError, ssl.SSLError):
        pass
    return text.split(": ", 1)[-1][:200]


def _first(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    return host.strip("[]"), int(port)


def _speaks_tls(bootstrap: str, timeout: float = 3.0) -> bool:
    """Whether the first bootstrap server completes a TLS handshake (a plaintext client's mistake)."""
    host, port = _first(bootstrap)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except (OSError, ssl.SSLError):
        return False


def _refused(needs: Needs, resource: str, name: str, operation: str) -> AccessRefused:
    grant = Grant(needs.principal, resource, name, operation)
    return AccessRefused(f"{needs.principal} may not {operation} {resource} {name}: {fix_hint(grant)}")


def _check_topics(admin: Any, needs: Needs, timeout: float) -> None:
    from confluent_kafka import KafkaError, KafkaException, TopicCollection
    from confluent_kafka.admin import AclOperation

    wanted = [(t, "Read") for t in needs.reads] + [(t, "Write") for t in needs.writes]
    wanted += [(t, "Create") for t in needs.owns]  # Faust asks to create them at every start
    if not wanted:
        return
    topics = sorted({t for t, _ in wanted})
    described = admin.describe_topics(
        TopicCollection(topics), include_authorized_operations=True, request_timeout=timeout
    )
    allowed: dict[str, set[str] | None] = {}
    for topic, future in described.items():
        try:
            description = future.result(timeout + 1)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                allowed[topic] = set()  # not even Describe
            elif exc.args[0].code() not in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
                log.warning("could not check topic %s: %s", topic, exc)  # missing topics are no refusal either
            continue
        except TimeoutError:
            log.warning("could not check topic %s within %gs", topic, timeout)
            continue
        ops = description.authorized_operations
        allowed[topic] = None if ops is None else {op.name for op in ops}
    for topic, operation in wanted:
        granted = allowed.get(topic)
        if granted is None:
            continue
        if operation.upper() not in granted and AclOperation.ALL.name not in granted:
            raise _refused(needs, "topic", topic, operation)


def _check_group(admin: Any, needs: Needs, timeout: float) -> None:
    """Read on the group, or a refusal. A fresh cluster answers COORDINATOR_NOT_AVAILABLE while it
    creates `__consumer_offsets`: that is asked again, and not a refusal if it lasts."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AclOperation

    assert needs.group is not None
    deadline = time.monotonic() + timeout
    while True:
        future = admin.describe_consumer_groups(
            [needs.group], include_authorized_operations=True, request_timeout=timeout
        )[needs.group]
        try:
            group = future.result(timeout + 1)
            break
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                raise _refused(needs, "group", needs.group, "Read") from None
            if time.monotonic() > deadline:
                log.warning("could not check group %s: %s", needs.group, exc)
                return
            time.sleep(0.2)  # the coordinator is being created: ask again shortly
        except TimeoutError:
            log.warning("could not check group %s within %gs", needs.group, timeout)
            return
    ops = group.authorized_operations
    if ops is not None and not {AclOperation.READ.name, AclOperation.ALL.name} & {op.name for op in ops}:
        raise _refused(needs, "group", needs.group, "Read")
