#!/usr/bin/env bash
# expect_failure.sh REGEX COMMAND…: passes when COMMAND exits non-zero within 60 s and its
# combined output matches the extended regex REGEX. A hang (timeout) or success fails.
set -u
regex=$1
shift
output=$(timeout 60 "$@" 2>&1)
status=$?
if [ "$status" -eq 0 ]; then
  echo "FAIL: command succeeded but was expected to fail: $*"
  echo "$output"
  exit 1
fi
if [ "$status" -eq 124 ]; then
  echo "FAIL: command hung (timed out after 60 s): $*"
  echo "$output"
  exit 1
fi
if ! grep -qE -- "$regex" <<<"$output"; then
  echo "FAIL: output does not match /$regex/ (exit $status): $*"
  echo "$output"
  exit 1
fi
echo "ok: exit $status, output matches /$regex/"
