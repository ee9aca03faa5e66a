from __future__ import annotations

from pathlib import Path

import pytest

from judgeflow.config import ConfigError, load_settings


def test_defaults_and_env_overrides() -> None:
    s = load_settings({"KAFKA_BOOTSTRAP_SERVERS": "a:1,b:2", "JUDGEFLOW_PARTITIONS": "8"})
    assert s.partitions == 8 and s.broker_url == "kafka://a:1,kafka://b:2"


@pytest.mark.parametrize(
    "env,fragment",
    [
        ({"KAFKA_BOOTSTRAP_SERVERS": "localhost"}, "KAFKA_BOOTSTRAP_SERVERS"),
        ({"KAFKA_BOOTSTRAP_SERVERS": "h:99999"}, "KAFKA_BOOTSTRAP_SERVERS"),
        ({"DATABASE_URL": "mysql://x"}, "DATABASE_URL"),
        ({"JUDGEFLOW_PARTITIONS": "four"}, "partitions"),
        ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "KAFKA_SECURITY_PROTOCOL"),
        ({"JUDGEFLOW_POLL_RECORDS": "-1"}, "JUDGEFLOW_POLL_RECORDS"),
    ],
)
def test_bad_settings_fail_in_one_line(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_config_file_then_env(tmp_path: Path) -> None:
    f = tmp_path / "judgeflow.toml"
    f.write_text(
        'topic_prefix = "acme."\npartitions = 2\n[kafka_security]\nsecurity_protocol = "SASL_PLAINTEXT"\n'
        'sasl_mechanism = "PLAIN"\nsasl_username = "u"\nsasl_password = "s3cret"\n'
    )
    s = load_settings({"JUDGEFLOW_PARTITIONS": "3"}, config_file=f)
    assert (s.topic_prefix, s.partitions) == ("acme.", 3)
    assert s.kafka_security.aiokafka_kwargs()["sasl_plain_password"] == "s3cret"
    assert "s3cret" not in repr(s)
    f.write_text("no_such_setting = 1\n")
    with pytest.raises(ConfigError, match="unknown setting"):
        load_settings({}, config_file=f)


@pytest.mark.parametrize("value,faust", [(None, 2000), ("500", 500), ("0", None)])
def test_the_poll_limit_reaches_fausts_consumer(tmp_path: Path, value: str | None, faust: int | None) -> None:
    from judgeflow.worker import worker_options
    from streams.app import build_app

    env = {"JUDGEFLOW_DATA_DIR": str(tmp_path)} | ({"JUDGEFLOW_POLL_RECORDS": value} if value else {})
    app = build_app(worker_options(load_settings(env)))
    assert app.conf.broker_max_poll_records == faust


def test_secrets_come_from_files_too(tmp_path: Path) -> None:
    url, password = tmp_path / "url", tmp_path / "password"
    url.write_text("postgresql://judge:s3cret@db:5432/judgeflow\n")
    password.write_text("kafka-s3cret\n")
    settings = load_settings({"DATABASE_URL_FILE": str(url), "KAFKA_SASL_PASSWORD_FILE": str(password)})
    assert settings.database_url == "postgresql://judge:s3cret@db:5432/judgeflow"
    assert settings.kafka_security.sasl_password == "kafka-s3cret"


def test_a_secret_set_twice_or_a_missing_secret_file_is_one_line_without_the_secret(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("kafka-s3cret")
    with pytest.raises(ConfigError, match="both set"):
        load_settings({"KAFKA_SASL_PASSWORD": "x", "KAFKA_SASL_PASSWORD_FILE": str(secret)})
    with pytest.raises(ConfigError, match="No such file") as missing:
        load_settings({"DATABASE_URL_FILE": str(tmp_path / "absent")})
    assert "s3cret" not in str(missing.value)
