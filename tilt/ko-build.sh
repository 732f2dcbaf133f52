#!/usr/bin/env bash
# Tilt's custom_build command for one service: ko builds the image (no
# Dockerfile, static binary on the offline nonroot base of .ko.yaml) and
# loads it into the local Docker daemon as ko.local/<svc>; Tilt then gets it
# under the one-time name it asked for ($EXPECTED_REF) and loads it into kind.
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

# The base image lives only in KOCACHE; writing it is idempotent and fails if
# its digest drifted from the one pinned in .ko.yaml.
(cd tools && GOWORK=off go run ./imagebase -layout "$KOCACHE/img" -verify ../.ko.yaml >/dev/null)

# Build for the cluster's architecture (kind nodes run the host's).
platform="linux/$(go env GOARCH)"
ref="$(KO_DOCKER_REPO=ko.local "$ko" build --platform="$platform" --base-import-paths "$1")"
docker tag "$ref" "$EXPECTED_REF"
