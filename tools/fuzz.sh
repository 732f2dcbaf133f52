#!/usr/bin/env bash
# Runs every Go fuzz target of the given packages, one after another (go
# test -fuzz takes one target per run), each for FUZZTIME (-fuzztime: a
# duration such as 30s, or a count of executions such as 1000000x), and
# prints per target its executions and result. Exits non-zero when any
# target failed; a failing input is written under the package's
# testdata/fuzz/<target>/, where every later plain `go test` replays it.
#
# usage: tools/fuzz.sh FUZZTIME DIR...   (make fuzz, make test: every module)
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=$1
shift

# The packages that may hold fuzz targets, by a look at their test files,
# so that only those are built to be listed; then each one's targets, as
# `go test -list` names them: the names, then "ok <package> <time>".
mapfile -t pkgs < <(grep -rlE --include='*_test.go' '^func Fuzz' "$@" | xargs -r -n1 dirname | sort -u | sed 's|^|./|')
if ((${#pkgs[@]} == 0)); then
  echo "no fuzz targets in $*" >&2
  exit 1
fi
targets=()
names=()
while read -r first second _; do
  case "$first" in
    Fuzz*) names+=("$first") ;;
    ok)
      for n in "${names[@]}"; do targets+=("$second $n"); done
      names=()
      ;;
    *) names=() ;;
  esac
done < <(go test -list '^Fuzz' "${pkgs[@]}")

mkdir -p .run
echo "==> ${#targets[@]} fuzz targets, each for $fuzztime (logs: .run/fuzz-<target>.log)"
failed=0
report=()
for t in "${targets[@]}"; do
  pkg=${t% *}
  name=${t#* }
  log=.run/fuzz-$name.log
  start=$(date +%s)
  fuzz() { go test -run='^$' -fuzz="^$name\$" -fuzztime="$fuzztime" "$pkg" >"$log" 2>&1; }
  # Go's fuzzing coordinator can fail a run that found nothing with a bare
  # "context deadline exceeded" when -fuzztime ends while a worker is busy
  # (a known issue of Go's fuzzing): no failing input, nothing to replay.
  # Such a run is tried once more; any real failure names its input.
  if fuzz || { ! grep -q 'Failing input' "$log" && grep -q '^    context deadline exceeded$' "$log" && fuzz; }; then
    result=ok
  else
    result=FAILED
    failed=1
  fi
  # The last progress line counts the executions. A short run may end
  # while it still replays the seeds and the cached corpus, before any.
  execs=$(sed -n 's/.*execs: \([0-9]*\).*/\1/p' "$log" | tail -1)
  line=$(printf '%-8s %-22s %12s execs %5ss  %s' "$result" "$name" "${execs:-0}" "$(($(date +%s) - start))" "$pkg")
  echo "$line"
  report+=("$line")
  if [ "$result" = FAILED ]; then
    grep -E -- '--- FAIL|Error|_test.go:[0-9]+|Failing input|testdata/fuzz' "$log" | head -20 | sed 's/^/    /'
  fi
done
echo "==> fuzz summary"
printf '%s\n' "${report[@]}"
exit $failed
