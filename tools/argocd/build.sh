#!/usr/bin/env bash
# Builds Argo CD's multi-call `argocd` binary (argocd-repo-server, argocd-application-controller, ...
# are the same file, selected by ARGOCD_BINARY_NAME) from the Go module proxy into
#   ${GITOPS_CACHE_DIR:-~/.cache/gitops-service}/argocd/<argo cd version>/argocd
# next to the two helper scripts Argo CD's image puts on PATH (hack/git-verify-wrapper.sh, which the
# repo-server runs for every manifest generation, and hack/gpg-wrapper.sh) and the `kustomize` and `helm`
# binaries of the versions Argo CD's image ships (hack/tool-versions.sh: kustomize5_version, helm4_version;
# the repo-server runs `kustomize build` for a kustomization and `helm template` for a chart), each built from
# the Go module proxy, and prints that folder. Skipped when they are all there; a folder an older build.sh
# left without one of them gets only what it lacks. helm costs about 3 CPU-minutes cold, 2 after the Argo CD
# build (the same k8s.io modules in the Go build cache): 1-2 min on two idle cores.
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
  [[ -x "$out/argocd" && -x "$out/kustomize" && -x "$out/helm" ]] || return 1
  for s in "${scripts[@]}"; do [[ -x "$out/$s" ]] || return 1; done
}
# go_tool <name> <tool-versions.sh variable> <module path without version> [ldflags]: installs the module's
# command at the version Argo CD pins into $out/<name>, unless it is there.
go_tool() {
  local name=$1 variable=$2 module=$3 ldflags="-s -w ${4:-}" version bin
  [[ -x "$out/$name" ]] && return 0
  version=$(sed -n "s/^$variable=//p" "$argocd_dir/hack/tool-versions.sh")
  [[ -n $version ]] || { echo "no $variable in Argo CD's hack/tool-versions.sh" >&2; exit 1; }
  bin=$(mktemp -d "$cache/argocd/.$name.XXXXXX")
  local t0=$SECONDS
  (
    cd "$bin"
    CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod GOBIN="$bin" go install -trimpath \
      -ldflags "${ldflags//@VERSION@/v$version}" "$module@v$version"
  ) >&2
  mv "$bin/$name" "$out/$name"
  rm -rf "$bin"
  echo "built $name v$version in $(( SECONDS - t0 ))s" >&2
}
install_scripts() {
  argocd_dir=$(cd "$here" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v3)
  for s in "${scripts[@]}"; do install -m 0755 "$argocd_dir/hack/$s" "$out/$s"; done
  go_tool kustomize kustomize5_version sigs.k8s.io/kustomize/kustomize/v5
  # Helm's Makefile stamps the release into internal/version (`helm version` prints it).
  go_tool helm helm4_version helm.sh/helm/v4/cmd/helm "-X helm.sh/helm/v4/internal/version.version=@VERSION@"
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
