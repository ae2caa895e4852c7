# The backend and the cluster-agent (and the RHOAS operator): one image, one entry point per process
#   node packages/backend/src/main.ts | node packages/cluster-agent/src/main.ts | node packages/rhoas-operator/src/main.ts
# and the admin CLI on PATH: kubectl-gitops ... (docs/admin-cli.md): `kubectl exec deploy/gitops-backend --
# kubectl-gitops operations` uses the Pod's DATABASE_URL, GITOPS_ENCRYPTION_KEYS and service account.
# Node 24 runs the TypeScript sources directly, so there is no compile step: the image holds the sources,
# the SQL migrations and the production dependencies only, and runs as a non-root user (uid 1000).
# NODE_IMAGE is any Node 24 image with npm (the official one by default); `pnpm images` passes a locally
# built one where no registry is reachable (images/base/build.sh).
ARG NODE_IMAGE=node:24

FROM ${NODE_IMAGE} AS deps
# PEM certificates of a TLS-inspecting proxy between this build and the npm registry, if any (`pnpm images`
# passes the machine's locally added CAs); used by this stage only, never part of the image.
ARG EXTRA_CA_CERTS=""
WORKDIR /app
RUN printf '%s\n' "$EXTRA_CA_CERTS" >/tmp/extra-ca.pem
ENV NODE_EXTRA_CA_CERTS=/tmp/extra-ca.pem
RUN npm install --global --no-fund --no-audit --loglevel=error pnpm@10.34.8
COPY package.json pnpm-lock.yaml pnpm-workspace.yaml ./
COPY packages/api/package.json packages/api/
COPY packages/appstudio/package.json packages/appstudio/
COPY packages/backend/package.json packages/backend/
COPY packages/cli/package.json packages/cli/
COPY packages/cluster-agent/package.json packages/cluster-agent/
COPY packages/db/package.json packages/db/
COPY packages/local-env/package.json packages/local-env/
COPY packages/rhoas-operator/package.json packages/rhoas-operator/
COPY packages/shared/package.json packages/shared/
COPY packages/test-support/package.json packages/test-support/
COPY e2e/package.json e2e/
# Production dependencies of the three processes and of the workspace packages they import, nothing else
# (named one by one: `--filter <pkg>...` would follow the dev-only link to local-env).
RUN pnpm install --frozen-lockfile --prod --ignore-scripts \
      --filter @gitops/backend --filter @gitops/cluster-agent --filter @gitops/rhoas-operator \
      --filter @gitops/appstudio --filter @gitops/api --filter @gitops/db --filter @gitops/shared \
      --filter @gitops/cli \
 && rm -rf packages/local-env packages/test-support e2e

FROM ${NODE_IMAGE}
# git for the backend (GitOps repository rendering and RepositoryCredential checks run the git CLI),
# ssh for git over ssh://, and the public CAs for git over HTTPS. The official image has all three; a
# minimal Debian base (images/base) gets them from Debian's packages, without recommends.
RUN if ! command -v git >/dev/null || ! command -v ssh >/dev/null || [ ! -s /etc/ssl/certs/ca-certificates.crt ]; then \
      apt-get update -qq \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
           git openssh-client ca-certificates >/dev/null \
      && apt-get clean && rm -rf /var/lib/apt/lists/*; \
    fi
WORKDIR /app
ENV NODE_ENV=production
COPY --from=deps /app/node_modules node_modules
COPY --from=deps /app/packages packages
COPY package.json ./
COPY db/migrations db/migrations
COPY packages/api/crds packages/api/crds
COPY packages/api/src packages/api/src
COPY packages/appstudio/src packages/appstudio/src
COPY packages/backend/src packages/backend/src
COPY packages/cli/bin packages/cli/bin
COPY packages/cli/src packages/cli/src
COPY packages/cluster-agent/src packages/cluster-agent/src
COPY packages/db/src packages/db/src
COPY packages/rhoas-operator/src packages/rhoas-operator/src
COPY packages/shared/src packages/shared/src
RUN ln -s /app/packages/cli/bin/kubectl-gitops /usr/local/bin/kubectl-gitops
# The commit this image is built from (`pnpm images` passes it): /version, gitops_build_info and the first log
# line of every process name it (docs/upgrades.md). Last, so that a new commit rebuilds no layer above.
ARG GITOPS_REVISION=unknown
ENV GITOPS_REVISION=${GITOPS_REVISION}
USER 1000:1000
CMD ["node", "packages/backend/src/main.ts"]
