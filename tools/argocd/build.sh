#!/usr/bin/env bash
# Builds Argo CD's multi-call `argocd` binary (argocd-repo-server, argocd-application-controller, ...
# are the same file, selected by ARGOCD_BINARY_NAME) from the Go module proxy into
#   ${GITOPS_CACHE_DIR:-~/.cache/gitops-service}/argocd/<argo cd version>/argocd
# next to the two helper scripts Argo CD's image puts on PATH (hack/git-verify-wrapper.sh, which the
# repo-server runs for every manifest generation, and hack/gpg-wrapper.sh) and the `kustomize` binary of the
# version Argo CD's image ships (hack/tool-versions.sh; the repo-server runs it for a kustomization), and
# prints that folder. Skipped when they are already there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(grep -Eo 'github\.com/argoproj/argo-cd/v3 v[0-9][^ ]*' "$here/go.mod" | head -1 | cut -d' ' -f2)
if [[ -z "$version" ]]; then
  echo "tools/argocd/go.mod does not require github.com/argoproj/argo-cd/v3" >&2
  exit 1
fi
cache=${GITOPS_CACHE_DIR:-$HOME/.cache/gitops-service}
out="$cache/argocd/$version"
scripts=(git-verify-wrapper.sh gpg-wrapper.sh)
have_all() {
  [[ -x "$out/argocd" && -x "$out/kustomize" ]] || return 1
  for s in "${scripts[@]}"; do [[ -x "$out/$s" ]] || return 1; done
}
install_scripts() {
  local dir kustomize_version
  dir=$(cd "$here" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v3)
  for s in "${scripts[@]}"; do install -m 0755 "$dir/hack/$s" "$out/$s"; done
  if [[ ! -x "$out/kustomize" ]]; then
    kustomize_version=$(sed -n 's/^kustomize5_version=//p' "$dir/hack/tool-versions.sh")
    [[ -n $kustomize_version ]] || { echo "no kustomize5_version in Argo CD's hack/tool-versions.sh" >&2; exit 1; }
    local bin
    bin=$(mktemp -d "$cache/argocd/.kustomize.XXXXXX")
    (
      cd "$bin"
      CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod GOBIN="$bin" go install -trimpath -ldflags '-s -w' \
        "sigs.k8s.io/kustomize/kustomize/v5@v$kustomize_version"
    ) >&2
    mv "$bin/kustomize" "$out/kustomize"
    rm -rf "$bin"
  fi
}
if have_all; then
  echo "$out"
  exit 0
fi
if [[ -x "$out/argocd" ]]; then
  install_scripts
  echo "$out"
  exit 0
fi
mkdir -p "$out"
tmp=$(mktemp -d "$cache/argocd/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
pkg=github.com/argoproj/argo-cd/v3/common
(
  cd "$here"
  CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -trimpath -o "$tmp/argocd" \
    -ldflags "-s -w -X $pkg.version=${version#v} -X $pkg.gitTag=$version -X $pkg.gitCommit=module-proxy -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z" \
    github.com/argoproj/argo-cd/v3/cmd
) >&2
mv "$tmp/argocd" "$out/argocd"
install_scripts
echo "built argocd $version in $(( $(date +%s) - start ))s: $(du -sh "$out/argocd" | cut -f1)" >&2
echo "$out"
