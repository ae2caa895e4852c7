#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager (and, with --node, kubelet, kube-scheduler and
# kubectl for the local cluster's node) from the Go module proxy into
#   ${GITOPS_CACHE_DIR:-~/.cache/gitops-service}/k8s/<kubernetes version>/
# and prints that folder. Each set is skipped when its binaries are already there.
# A cold build on 2 cores takes roughly 10-20 minutes for the control plane; warm (cached) it returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
k8s_version=$(awk '$1=="k8s.io/kubernetes" {print $2; exit}' "$here/go.mod")
k8s_version=${k8s_version:-$(grep -Eo 'k8s.io/kubernetes v[0-9.]+' "$here/go.mod" | head -1 | cut -d' ' -f2)}
cache=${GITOPS_CACHE_DIR:-$HOME/.cache/gitops-service}
out="$cache/k8s/$k8s_version"
minor=$(echo "$k8s_version" | cut -d. -f2)
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"

# build <label> <binary>... -- <package>...: one `go build` of the packages into the cache, unless every
# named binary is already there (each set is built once; a cache from before a set existed keeps working).
build() {
  local label=$1
  shift
  local names=() pkgs=() missing=false
  while [[ $1 != -- ]]; do names+=("$1"); shift; done
  shift
  pkgs=("$@")
  for n in "${names[@]}"; do [[ -x "$out/$n" ]] || missing=true; done
  $missing || return 0
  mkdir -p "$out"
  local tmp start
  tmp=$(mktemp -d "$cache/k8s/.build.XXXXXX")
  start=$(date +%s)
  if ! (cd "$here" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -trimpath -o "$tmp/" -ldflags "$ldflags" "${pkgs[@]}") >&2; then
    rm -rf "$tmp"
    return 1
  fi
  # `go build` names the etcd main package after its path without the /v3 suffix.
  [[ -e "$tmp/server" ]] && mv "$tmp/server" "$tmp/etcd"
  for n in "${names[@]}"; do mv "$tmp/$n" "$out/"; done
  rm -rf "$tmp"
  echo "built $label $k8s_version in $(( $(date +%s) - start ))s" >&2
}

mkdir -p "$cache/k8s"
build "control plane" etcd kube-apiserver kube-controller-manager -- \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager go.etcd.io/etcd/server/v3
# The local cluster's node (packages/local-env/src/node.ts): built only when asked (`--node`), or for
# everything when GITOPS_K8S_NODE=true, so that `pnpm test` alone never pays for it.
if [[ "${1:-}" == "--node" || "${GITOPS_K8S_NODE:-}" == true ]]; then
  build "node (kubelet, kube-scheduler, kubectl)" kubelet kube-scheduler kubectl -- \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
fi
echo "$out"
