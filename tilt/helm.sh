#!/usr/bin/env bash
# helm, as the Tiltfile runs it: the version pinned in charts/go.mod (the
# library the charts tests render and lint with), built once per machine
# into $ESIM_TOOLS_CACHE (~/.cache/esim-tools) on first use. Tilt's helm()
# builtin would take whatever helm is on PATH, and `make tools` installs
# none.
#
# usage: tilt/helm.sh ARGS...   (any helm command, e.g. template NAME CHART)
set -euo pipefail
cd "$(dirname "$0")/.."

# GOWORK=off: the charts module alone pins helm and its dependencies; the
# workspace's other modules must not pull its build list around.
mod() { (cd charts && GOWORK=off go list -m -f '{{.Version}}' "$1"); }
helm_version="$(mod helm.sh/helm/v3)"
# A helm built from source reports Kubernetes v1.20 to charts unless told
# otherwise, and `helm template` then refuses the charts' kubeVersion. Stamp
# it as helm's own release build does: the minor of its client-go.
client_go="$(mod k8s.io/client-go)" # v0.MINOR.PATCH
kube_minor="$(echo "$client_go" | cut -d. -f2)"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  ldflags="$ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kube_minor"
done

# One build per helm version, Kubernetes minor and Go release, shared by
# every clone on the machine.
cache="${ESIM_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/esim-tools}"
bin="$cache/helm-$helm_version-k8s1.$kube_minor-$(go env GOVERSION)/helm"
if [ ! -x "$bin" ]; then
  echo "building helm $helm_version into $bin (once per machine; a minute or two)" >&2
  mkdir -p "$(dirname "$bin")"
  (cd charts && GOWORK=off go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" helm.sh/helm/v3/cmd/helm)
  mv "$bin.tmp" "$bin"
fi

# Each chart's charts/library is a symlink to the shared library chart; helm
# logs every one it follows, which is noise here.
exec "$bin" "$@" 2> >(grep -v 'found symbolic link in path' >&2)
