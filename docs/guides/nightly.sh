#!/usr/bin/env bash
# One night of storage regression tracking: run the workload, compare it with the last good
# night, keep the verdict. Usage: nightly.sh TARGET STATE_DIR
#   TARGET     the directory (or URL) to measure; iobench writes only in TARGET/.iobench-RUN_ID/
#   STATE_DIR  where the nights are kept: history/ (every run), baseline.json (the last good
#              night), nights/N/ (each night's result.json, compare.md and exit status)
# Exit status: 0 no regression (or the first night: it becomes the baseline); 1 regression
# (the baseline stays: a bad night never becomes the reference); 3 not comparable (the workload
# or setup changed: the baseline stays; re-baseline by removing STATE_DIR/baseline.json);
# 2 bad input, 4 the run failed, 130 interrupted (iobench's own codes, passed through).
# Settings: IOBENCH (the command, default iobench), WORKLOAD (default sequential-write),
# REPEAT (repeats a night, default 3: with fewer, and fewer than 3 earlier nights in the
# history, compare cannot tell a change from noise and calls it unconfirmed, exit 0),
# NIGHTLY_OPTS (more `iobench run` options, e.g. "--set size=1GiB"), COMPARE_OPTS (more
# `iobench compare` options, e.g. "--threshold bandwidth=5%").
set -uo pipefail
target="${1:?usage: nightly.sh TARGET STATE_DIR}"
state="${2:?usage: nightly.sh TARGET STATE_DIR}"
iobench="${IOBENCH:-iobench}"
workload="${WORKLOAD:-sequential-write}"
mkdir -p "$state/nights"
night="$state/nights/$(date -u +%Y%m%dT%H%M%SZ)-$$"
mkdir "$night"

# 1. Measure. Every run goes into the history (the noise floor compare uses).
# shellcheck disable=SC2086  # NIGHTLY_OPTS is a list of options
$iobench run "$workload" "$target" --output "$night/run" --history "$state/history" \
    --repeat "${REPEAT:-3}" --quiet ${NIGHTLY_OPTS:-} >"$night/run.txt"
status=$?
if [ "$status" -ne 0 ]; then
  echo "nightly: the run failed (exit $status); see $night/run.txt" >&2
  echo "$status" >"$night/exit"
  exit "$status"
fi

# 2. The first night is the baseline.
if [ ! -f "$state/baseline.json" ]; then
  cp "$night/run/result.json" "$state/baseline.json"
  echo "nightly: first night: $night/run/result.json is the baseline"
  echo 0 >"$night/exit"
  exit 0
fi

# shellcheck disable=SC2086  # COMPARE_OPTS is a list of options
# 3. Compare with the last good night (an explicit file: never "the run before", which may be
#    last night's regression).
$iobench compare "$state/baseline.json" "$night/run/result.json" --history "$state/history" \
    --format markdown ${COMPARE_OPTS:-} >"$night/compare.md"
status=$?
echo "$status" >"$night/exit"
case "$status" in
  0) cp "$night/run/result.json" "$state/baseline.json"
     echo "nightly: no regression; this night is the new baseline" ;;
  1) echo "nightly: REGRESSION against the baseline; see $night/compare.md" >&2 ;;
  3) echo "nightly: not comparable with the baseline; see $night/compare.md" >&2 ;;
  *) echo "nightly: compare failed (exit $status)" >&2 ;;
esac
exit "$status"
