#!/usr/bin/env bash
# One set-up step for the machine, called by the README's command lines and by .ci/run.
# As root on Debian/Ubuntu it installs, when missing, the Debian packages the project needs:
#   redis-server (Argo CD's cache), docker.io (engine: builds the images) + docker-compose, containerd + runc +
#   containernetworking-plugins (the local cluster's node), debootstrap (local base image), git, prometheus (tier 3a's
#   e2e/tier3a/monitoring.test.ts runs the alert rules and the dashboard's queries against it; not started as a service),
#   pgbouncer (e2e/tier3a/pgbouncer.test.ts runs the service behind it: @gitops/local-env startPgBouncer starts its own),
#   docker-registry (an OCI registry: e2e/tier3b/chart-sources.test.ts pushes a Helm chart to one that
#   @gitops/local-env startOciRegistry starts with a configuration of its own; the package's own service is not used)
# and starts dockerd when it is not running. Quiet when nothing is missing; idempotent.
# Where it cannot act (not root, not Debian) it says what is missing and exits 0: `pnpm dev` and
# `pnpm test` then run without what needs those packages, and say so. `--require` makes that an error (CI).
set -euo pipefail
require=false
[[ "${1:-}" == "--require" ]] && require=true

packages=(redis-server docker.io docker-compose containerd runc containernetworking-plugins debootstrap git prometheus pgbouncer docker-registry)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then missing+=("$p"); fi
done

cannot() {
  echo "setup-machine: $*" >&2
  if $require; then exit 1; fi
  exit 0
}

if ((${#missing[@]} > 0)); then
  if ! command -v apt-get >/dev/null 2>&1 || ! grep -qiE '^(ID|ID_LIKE)=.*(debian|ubuntu)' /etc/os-release 2>/dev/null; then
    cannot "not a Debian/Ubuntu machine: install ${missing[*]} yourself (pnpm dev falls back to a cluster without a node, tier 4 cannot run)"
  fi
  if [[ $(id -u) != 0 ]]; then
    cannot "not root: run 'sudo apt-get install ${missing[*]}' (or run this script as root); until then pnpm dev falls back to a cluster without a node and tier 4 cannot run"
  fi
  echo "setup-machine: installing ${missing[*]}" >&2
  apt_log=$(mktemp)
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$apt_log" 2>&1; then
    cat "$apt_log" >&2
    rm -f "$apt_log"
    cannot "apt-get could not install ${missing[*]}"
  fi
  rm -f "$apt_log"
fi

# dockerd: Debian's docker.io has no init system to start it in a container; start it in its own session.
docker_sock=/var/run/docker.sock
docker_running() { pidof dockerd >/dev/null 2>&1 || docker version >/dev/null 2>&1; }
if command -v dockerd >/dev/null 2>&1 && ! docker_running; then
  if [[ $(id -u) != 0 ]]; then cannot "dockerd is not running and this is not root: start it with 'sudo dockerd &'"; fi
  log=/var/log/gitops-service-dockerd.log
  setsid dockerd --host="unix://$docker_sock" >"$log" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    docker version >/dev/null 2>&1 && break
    sleep 0.5
  done
  docker version >/dev/null 2>&1 || cannot "dockerd did not start (see $log)"
  echo "setup-machine: started dockerd (log $log)" >&2
fi
exit 0
