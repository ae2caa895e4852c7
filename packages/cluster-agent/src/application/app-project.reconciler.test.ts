import assert from 'node:assert/strict';
import type { Db } from '@gitops/db';
import { createTurns, type KubeConfig, type KubeObject, type Logger } from '@gitops/shared';
import { describe, it } from 'vitest';
import { AgentLabel, appProjectName, clusterAppProjectName } from '../argocd.ts';
import {
  type AppProjectDeps,
  isProjectSettled,
  projectCovers,
  projectUsers,
  reconcileAppProject,
  reconcileProject,
} from './app-project.reconciler.ts';
import { ABSENT, createSettled, ownedState } from './settled.ts';

const TENANT = '11111111-1111-4111-8111-111111111111';
const MAIN = appProjectName(TENANT);
const CLUSTER = clusterAppProjectName(TENANT);

const project = (name: string, spec: unknown): KubeObject => ({
  metadata: { name, namespace: 'argocd', labels: { [AgentLabel.DatabaseId]: TENANT } },
  spec,
});
const application = (
  id: string,
  projectName: string,
  repoURL = 'https://github.com/org/repo',
): KubeObject => ({
  metadata: { name: `app-${id}`, namespace: 'argocd', labels: { [AgentLabel.DatabaseId]: id } },
  spec: { project: projectName, source: { repoURL }, destination: { name: 'in-cluster' } },
});

/** Deps over plain objects: no API server and no database (a step that reaches them fails the test). */
function depsOf(projects: KubeObject[], applications: KubeObject[] = []): AppProjectDeps {
  return {
    kc: {} as KubeConfig,
    db: {} as Db,
    namespace: 'argocd',
    engineInstanceId: '99999999-9999-4999-8999-999999999999',
    applications: { list: () => applications },
    appProjects: { get: (_namespace, name) => projects.find((p) => p.metadata.name === name) },
    settledProjects: createSettled(),
    projectTurns: createTurns(),
  };
}
const options = {
  signal: new AbortController().signal,
  logger: { debug() {}, info() {} } as unknown as Logger,
};

const mainProject = project(MAIN, {
  sourceRepos: ['https://github.com/org/repo'],
  destinations: [{ name: 'in-cluster', namespace: 'jane' }],
});

describe('projectUsers', () => {
  it('are the Applications naming the project, but not those going away', () => {
    const apps = [application('a', MAIN), application('b', CLUSTER), application('c', MAIN)];
    assert.deepEqual(
      projectUsers(apps, MAIN).map((a) => a.metadata.name),
      ['app-a', 'app-c'],
    );
    assert.deepEqual(
      projectUsers(apps, MAIN, ['a']).map((a) => a.metadata.name),
      ['app-c'],
    );
    assert.deepEqual(projectUsers(apps, 'other'), []);
  });
});

describe('isProjectSettled', () => {
  it('needs both projects as last found: present with the same owned fields, or still absent', () => {
    const deps = depsOf([mainProject]);
    assert.equal(isProjectSettled(deps, TENANT), false);
    deps.settledProjects.settle(MAIN, ownedState(mainProject));
    assert.equal(isProjectSettled(deps, TENANT), false);
    deps.settledProjects.settle(CLUSTER, ABSENT);
    assert.equal(isProjectSettled(deps, TENANT), true);
    // The cluster project appeared since it was found absent.
    const grown = depsOf([mainProject, project(CLUSTER, {})]);
    grown.settledProjects.settle(MAIN, ownedState(mainProject));
    grown.settledProjects.settle(CLUSTER, ABSENT);
    assert.equal(isProjectSettled(grown, TENANT), false);
    // The main project changed in what we own.
    const changed = depsOf([project(MAIN, { sourceRepos: [] })]);
    changed.settledProjects.settle(MAIN, ownedState(mainProject));
    changed.settledProjects.settle(CLUSTER, ABSENT);
    assert.equal(isProjectSettled(changed, TENANT), false);
  });
});

describe('projectCovers', () => {
  const settledDeps = () => {
    const deps = depsOf([mainProject]);
    deps.settledProjects.settle(MAIN, ownedState(mainProject));
    deps.settledProjects.settle(CLUSTER, ABSENT);
    return deps;
  };
  const desired = application('d', MAIN, 'https://GitHub.com/org/repo.git/');

  it('covers an Application whose repository and destination the settled project lists', () => {
    assert.equal(projectCovers(settledDeps(), TENANT, MAIN, desired, undefined), true);
    assert.equal(projectCovers(settledDeps(), TENANT, MAIN, desired, application('d', MAIN)), true);
  });

  it('not when the projects are not settled, or it uses a repository or destination they do not list', () => {
    assert.equal(projectCovers(depsOf([mainProject]), TENANT, MAIN, desired, undefined), false);
    const otherRepo = application('d', MAIN, 'https://github.com/org/other');
    assert.equal(projectCovers(settledDeps(), TENANT, MAIN, otherRepo, undefined), false);
    const elsewhere = {
      ...desired,
      spec: { ...(desired.spec as object), destination: { name: 'managed-env-x' } },
    };
    assert.equal(projectCovers(settledDeps(), TENANT, MAIN, elsewhere, undefined), false);
    assert.equal(projectCovers(settledDeps(), TENANT, CLUSTER, desired, undefined), false);
    const noRepo = { ...desired, spec: { destination: { name: 'in-cluster' } } };
    assert.equal(projectCovers(settledDeps(), TENANT, MAIN, noRepo, undefined), false);
  });

  it('not when the live Application had another repository (it may have left the tenant list)', () => {
    const live = application('d', MAIN, 'https://github.com/org/old');
    assert.equal(projectCovers(settledDeps(), TENANT, MAIN, desired, live), false);
  });
});

describe('projectCovers with several sources (issue 35)', () => {
  const deps = () => {
    const twoRepos = project(MAIN, {
      sourceRepos: ['http://charts.example.com', 'https://github.com/org/repo'],
      destinations: [{ name: 'in-cluster', namespace: 'jane' }],
    });
    const d = depsOf([twoRepos]);
    d.settledProjects.settle(MAIN, ownedState(twoRepos));
    d.settledProjects.settle(CLUSTER, ABSENT);
    return d;
  };
  const withSources = (...repoURLs: string[]): KubeObject => ({
    ...application('s', MAIN),
    spec: {
      project: MAIN,
      sources: repoURLs.map((repoURL) => ({ repoURL })),
      destination: { name: 'in-cluster' },
    },
  });

  it('covers an Application only when the project lists every source’s repository', () => {
    const both = withSources('http://charts.example.com/', 'https://github.com/org/repo.git');
    assert.equal(projectCovers(deps(), TENANT, MAIN, both, undefined), true);
    const third = withSources('http://charts.example.com', 'https://github.com/org/other');
    assert.equal(projectCovers(deps(), TENANT, MAIN, third, undefined), false);
  });

  it('not when the live Application had other sources (one may have left the tenant list)', () => {
    const both = withSources('http://charts.example.com', 'https://github.com/org/repo');
    const liveOne = withSources('https://github.com/org/repo');
    assert.equal(projectCovers(deps(), TENANT, MAIN, both, liveOne), false);
    assert.equal(projectCovers(deps(), TENANT, MAIN, both, both), true);
  });
});

describe('reconcileProject without writes', () => {
  it('a wanted project found matching is settled as it is', async () => {
    const deps = depsOf([mainProject]);
    assert.equal(await reconcileProject(deps, MAIN, mainProject, options), false);
    assert.equal(deps.settledProjects.matches(MAIN, ownedState(mainProject)), true);
  });

  it('an unwanted project still in use is kept and not settled', async () => {
    const deps = depsOf([mainProject], [application('a', MAIN)]);
    deps.settledProjects.settle(MAIN, ownedState(mainProject));
    assert.equal(await reconcileProject(deps, MAIN, undefined, options), false);
    assert.equal(deps.settledProjects.matches(MAIN, ownedState(mainProject)), false);
  });

  it('the projects of a tenant id that is no uuid are rightly absent; its queue is emptied', async () => {
    const deps = depsOf([]);
    assert.deepEqual(await reconcileAppProject(deps, 'not-a-uuid', options), {
      status: 'done',
      changed: false,
    });
    assert.equal(deps.settledProjects.matches(appProjectName('not-a-uuid'), ABSENT), true);
    assert.equal(deps.settledProjects.matches(clusterAppProjectName('not-a-uuid'), ABSENT), true);
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(deps.projectTurns.size, 0);
  });

  it("one tenant's reconciles run one after the other", async () => {
    const deps = depsOf([]);
    const order: string[] = [];
    let release = () => {};
    void deps.projectTurns.run(
      'not-a-uuid',
      () =>
        new Promise<void>((resolve) => {
          release = () => {
            order.push('earlier');
            resolve();
          };
        }),
    );
    const run = reconcileAppProject(deps, 'not-a-uuid', options).then(() => order.push('this'));
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(order, []);
    release();
    await run;
    assert.deepEqual(order, ['earlier', 'this']);
  });
});
