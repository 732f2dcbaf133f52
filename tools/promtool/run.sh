#!/usr/bin/env bash
# promtool (Prometheus's rule checker and rule unit tester) and metricnames
# (this folder's: the metric names rule files and dashboards query), as
# the tests run them: built from the Prometheus module pinned in this
# folder's go.mod, once per machine, into $ESIM_TOOLS_CACHE
# (~/.cache/esim-tools) under a key of what pins them. Outside the
# workspace (GOWORK=off) and its build list: Prometheus's dependencies
# never reach the services.
#
# usage: tools/promtool/run.sh promtool ARGS...
#        tools/promtool/run.sh metricnames FILE...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
case "${1:-}" in
  promtool | metricnames) ;;
  *) echo "usage: $0 promtool|metricnames ARGS..." >&2; exit 2 ;;
esac

key="$(cd "$here" && cat go.mod go.sum run.sh metricnames/*.go | sha256sum | cut -c1-16)-$(go env GOVERSION)"
cache="${ESIM_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/esim-tools}"
dir="$cache/promtool-$key"
if [ ! -f "$dir/.stamp" ]; then
  echo "building promtool into $dir (once per machine; several minutes)" >&2
  mkdir -p "$cache"
  tmp="$(mktemp -d "$dir.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  # Stamped as Prometheus's release build is, so `promtool --version`
  # names the pin.
  version="$(cd "$here" && GOWORK=off go list -m -f '{{.Version}}' github.com/prometheus/prometheus)"
  (cd "$here" && GOWORK=off GOFLAGS=-mod=readonly go build -trimpath \
    -ldflags "-X github.com/prometheus/common/version.Version=$version" \
    -o "$tmp/" github.com/prometheus/prometheus/cmd/promtool ./metricnames)
  touch "$tmp/.stamp"
  # One rename, so a concurrent run sees all of it or none; when another
  # clone or test got there first, its copy (the same build) stays.
  mv -T "$tmp" "$dir" 2>/dev/null || true
  trap - EXIT
  rm -rf "$tmp"
fi
exec "$dir/$1" "${@:2}"
