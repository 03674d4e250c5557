#!/usr/bin/env bash
# Runs one test executable of the ThreadSanitizer tree whose tests start child processes (the TSan-built `tessera`
# as head, workers or server), then fails if any process of the run wrote a race report. A child that halts on a
# race may go unnoticed by the test itself (a killed worker is what recovery tests expect), so every process logs
# its reports to a folder of its own run, checked here.
# usage: tsan_children.sh TEST_EXECUTABLE GTEST_FILTER [SUPPRESSIONS_FILE]
set -uo pipefail
exe=$1
filter=$2
supp=${3:-}
logs=$(mktemp -d "${TMPDIR:-/tmp}/tessera-tsan.XXXXXX")
trap 'rm -rf "$logs"' EXIT
options="${TSAN_OPTIONS:-} halt_on_error=1 second_deadlock_stack=1 exitcode=66 log_path=$logs/report"
[ -n "$supp" ] && options="$options suppressions=$supp"
TSAN_OPTIONS="$options" "$exe" --gtest_filter="$filter"
rc=$?
reports=("$logs"/report.*)
if [ -e "${reports[0]}" ]; then
  for r in "${reports[@]}"; do
    echo "==== ThreadSanitizer report of process ${r##*.} ===="
    cat "$r"
  done
  exit 1
fi
exit $rc
