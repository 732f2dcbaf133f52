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

# build_tilt DIR LDFLAGS OUT: tilt from a copy of the scratch module DIR
# whose tilt module is replaced by a writable copy of it, with the web UI's
# index.html added.
build_tilt() {
  local dir=$1 ldflags=$2 out=$3 tmp src
  tmp=$(mktemp -d)
  # shellcheck disable=SC2064 # expanded now: tmp is local
  trap "chmod -R u+w '$tmp'; rm -rf '$tmp'" RETURN
  src=$(cd "$dir" && go mod download -json github.com/tilt-dev/tilt | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  cp -r "$src" "$tmp/tilt"
  chmod -R u+w "$tmp/tilt"
  cp "$dir/webui/index.html" "$tmp/tilt/pkg/assets/build/index.html"
  cp "$dir/go.mod" "$dir/go.sum" "$tmp/"
  (cd "$tmp" && go mod edit -replace github.com/tilt-dev/tilt=./tilt &&
    go build -trimpath -ldflags "$ldflags" -o "$out" "${pkg[tilt]}")
}

# path NAME: where NAME is built, once per machine; builds it if missing,
# once even when several runs ask at once (the others wait on the lock).
path() {
  local name=$1 dir version date key bin ldflags="-s -w"
  dir="$root/${module[$name]}"
  # GOWORK=off: the scratch module alone decides every version.
  # GONOSUMDB: tilt's apimachinery fork is not in the checksum database;
  # go.sum pins it all the same.
  export GOWORK=off GONOSUMDB=github.com/tilt-dev GOFLAGS=-mod=readonly
  read -r version date < <(cd "$dir" && go list -m -f '{{.Version}} {{.Time.Format "2006-01-02"}}' "${versioned[$name]}")
  # tilt's release build stamps its version and embeds its web UI, which
  # is compiled from JavaScript and so is not in the Go module. Unstamped,
  # tilt calls itself v0.33.20-dev and serves the UI from its JavaScript
  # sources with yarn; stamped, it needs the compiled UI's index.html or
  # refuses to start. So it is stamped, and built from a copy of its module
  # with tools/tilt/webui/index.html (a page pointing to the command line)
  # in place of the UI; the module's own go.mod still decides every
  # dependency.
  [ "$name" != tilt ] || ldflags="$ldflags -X main.version=${version#v} -X main.date=$date"
  key=$(cat "$dir/go.mod" "$dir/go.sum" <(echo "$ldflags") | sha256sum | cut -c1-16)
  [ "$name" != tilt ] || key=$(cat <(echo "$key") "$dir/webui/index.html" <(declare -f build_tilt) | sha256sum | cut -c1-16)
  bin="$cache/$name-$version-$key-$(go env GOVERSION)/$name"
  if [ ! -x "$bin" ]; then
    mkdir -p "$cache"
    (
      flock 9
      if [ ! -x "$bin" ]; then
        echo "building $name $version into $(dirname "$bin") (once per machine)" >&2
        mkdir -p "$(dirname "$bin")"
        if [ "$name" = tilt ]; then
          build_tilt "$dir" "$ldflags" "$bin.tmp"
        else
          (cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" "${pkg[$name]}")
        fi
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
