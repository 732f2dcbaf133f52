#!/usr/bin/env bash
# tilt, and the OCI registry `tilt ci` pushes the images it builds to,
# as pinned by the scratch modules tools/tilt (tilt's own replace lines
# included) and tools/tilt/registry, built once per machine into
# $ESIM_TOOLS_CACHE (~/.cache/esim-tools) keyed by those pins, as
# tilt/helm.sh does for helm. Neither module is in go.work: tilt's
# dependencies (an old apimachinery fork among them) must not pull the
# services' build list around.
#
# usage: tilt/tool.sh tilt ARGS...       run tilt (e.g. ci, up, alpha tiltfile-result)
#        tilt/tool.sh registry ARGS...   run go-containerregistry's registry
#        tilt/tool.sh build              build both and print their paths
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${ESIM_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/esim-tools}"

# A tool's module directory, main package and the module that names its
# version.
declare -A module=([tilt]=tools/tilt [registry]=tools/tilt/registry)
declare -A pkg=([tilt]=github.com/tilt-dev/tilt/cmd/tilt [registry]=github.com/google/go-containerregistry/cmd/registry)
declare -A versioned=([tilt]=github.com/tilt-dev/tilt [registry]=github.com/google/go-containerregistry)

# path NAME: where NAME is built, once per machine; builds it if missing,
# once even when several runs ask at once (the others wait on the lock).
path() {
  local name=$1 dir version key bin ldflags
  dir="$root/${module[$name]}"
  # GOWORK=off: the scratch module alone decides every version.
  # GONOSUMDB: tilt's apimachinery fork is not in the checksum database;
  # go.sum pins it all the same.
  export GOWORK=off GONOSUMDB=github.com/tilt-dev GOFLAGS=-mod=readonly
  version=$(cd "$dir" && go list -m -f '{{.Version}}' "${versioned[$name]}")
  # A build from source calls itself tilt's last development version
  # unless told its release and date, as goreleaser does.
  ldflags="-s -w"
  if [ "$name" = tilt ]; then
    ldflags="$ldflags -X main.version=${version#v} -X main.date=$(cd "$dir" && go list -m -f '{{.Time.Format "2006-01-02"}}' "${versioned[$name]}")"
  fi
  key=$(cat "$dir/go.mod" "$dir/go.sum" <(echo "$ldflags") | sha256sum | cut -c1-16)
  bin="$cache/$name-$version-$key-$(go env GOVERSION)/$name"
  if [ ! -x "$bin" ]; then
    mkdir -p "$cache"
    (
      flock 9
      if [ ! -x "$bin" ]; then
        echo "building $name $version into $(dirname "$bin") (once per machine; tilt takes minutes)" >&2
        mkdir -p "$(dirname "$bin")"
        (cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" "${pkg[$name]}")
        mv "$bin.tmp" "$bin"
      fi
    ) 9>"$cache/$name.lock"
  fi
  echo "$bin"
}

case "${1:-}" in
  tilt | registry)
    bin=$(path "$1")
    shift
    exec "$bin" "$@"
    ;;
  build)
    path tilt
    path registry
    ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
