#!/usr/bin/env bash
# Installs the system tools judgeflow's self-started services need when they
# are missing: a Java runtime and Maven (Kafka from Maven Central jars),
# Chromium for the dashboard's headless-browser test, and Prometheus with
# Alertmanager for the alert rules' tests.
# Python 3.11+ with venv is assumed. Uses apt-get where available.
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v mvn  >/dev/null 2>&1 || need+=(maven)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# The dashboard's browser test drives Debian's Chromium (no browser download).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The alert rules are tested with promtool and in a real Prometheus and Alertmanager.
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || need+=(prometheus-alertmanager)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing: ${need[*]} (install them, or set KAFKA_BOOTSTRAP_SERVERS / DATABASE_URL)" >&2
  exit 1
fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
