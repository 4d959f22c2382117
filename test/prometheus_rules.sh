#!/usr/bin/env bash
# The Prometheus alert rules in deploy/prometheus: syntax (promtool check
# rules) and their unit tests (promtool test rules). Exit 77 (skip) when
# promtool is missing; Debian's package 'prometheus' has it.
set -euo pipefail
root=${IDPOOL_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
command -v promtool >/dev/null || { echo "SKIP: promtool is not installed"; exit 77; }
cd "$root/deploy/prometheus"
promtool check rules idpool-alerts.yml
promtool test rules idpool-alerts.test.yml
