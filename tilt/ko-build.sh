#!/usr/bin/env bash
# Tilt's custom_build command for one service: ko builds the image (no
# Dockerfile, static binary on the offline nonroot base of .ko.yaml) and
# loads it into the local Docker daemon as ko.local/<svc>; Tilt then gets it
# under the one-time name it asked for ($EXPECTED_REF) and loads it into kind.
# With ESIM_KO_PUSH=1 (the Tiltfile sets it when given a registry) there is
# no Docker daemon: ko pushes the image straight to $EXPECTED_REF.
#
# usage: tilt/ko-build.sh ./services/<svc>/cmd/<svc>
set -euo pipefail
cd "$(dirname "$0")/.."

: "${EXPECTED_REF:?set by Tilt}"
export KOCACHE="${KOCACHE:-$PWD/.kocache}"
ko="${KO:-$PWD/.bin/ko}"
if [ ! -x "$ko" ]; then
  echo "ko not found at $ko: run 'make tools'" >&2
  exit 1
fi

# The base image lives only in KOCACHE; writing it fails if its digest
# drifted from the one pinned in .ko.yaml. Tilt runs several builds at once,
# and the layout's index.json is rewritten in place: it is written once, by
# one of them under a lock, while the others wait, and never again while ko
# may be reading it (the marker records that it was written whole).
mkdir -p "$KOCACHE"
(
  flock 9
  marker="$KOCACHE/img/esim-base.ref"
  if [ "$(cat "$marker" 2>/dev/null)" != "$(sed -n 's/^defaultBaseImage: *//p' .ko.yaml)" ]; then
    rm -f "$marker"
    (cd tools && GOWORK=off go run ./imagebase -layout "$KOCACHE/img" -verify ../.ko.yaml) >"$KOCACHE/esim-base.ref.tmp"
    mv "$KOCACHE/esim-base.ref.tmp" "$marker"
  fi
) 9>"$KOCACHE/img.lock"

# Build for the cluster's architecture (kind nodes run the host's).
platform="linux/$(go env GOARCH)"

if [ "${ESIM_KO_PUSH:-}" = 1 ]; then
  # --bare and the tag Tilt expects: exactly $EXPECTED_REF, which Tilt then
  # deploys without looking for the image anywhere. No SBOM: these images
  # live as long as the session.
  KO_DOCKER_REPO="${EXPECTED_REF%:*}" "$ko" build --platform="$platform" --bare \
    --tags="${EXPECTED_REF##*:}" --sbom=none "$1" >/dev/null
  exit
fi

ref="$(KO_DOCKER_REPO=ko.local "$ko" build --platform="$platform" --base-import-paths "$1")"
docker tag "$ref" "$EXPECTED_REF"
