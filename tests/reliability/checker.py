"""The reliability checker lives in `bench.accounting` (the soak uses it too); the suite imports it from here."""

from bench.accounting import (  # noqa: F401
    Published,
    TableCount,
    TopicChecker,
    TopicCount,
    check_database,
    check_topics,
    describe,
    sha,
    summary,
)
