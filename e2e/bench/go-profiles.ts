/**
 * CPU profiles of the Go processes a benchmark runs (kube-apiserver, argocd-application-controller) over its
 * timed part, for `go tool pprof` (docs/performance.md, "How to run it"). Go serves a CPU profile for a number
 * of seconds given up front, so the window is covered by consecutive profiles of `chunkSeconds` each, taken
 * until `stop()`; `go tool pprof -proto <dir>/<name>-*.pb.gz` merges them.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { kubeStream } from '@gitops/shared';

/** A process that serves `/debug/pprof/profile`: `read(seconds)` returns one profile of that length. */
export interface ProfiledProcess {
  name: string;
  read(seconds: number): Promise<Uint8Array>;
}

/** The API server's profile, through the admin kubeconfig `kc`. */
export function apiServerProfile(kc: Parameters<typeof kubeStream>[0]): ProfiledProcess {
  return {
    name: 'kube-apiserver',
    read: async (seconds) => {
      const body = await kubeStream(kc, {
        path: '/debug/pprof/profile',
        query: { seconds: String(seconds) },
      });
      return new Uint8Array(await body.arrayBuffer());
    },
  };
}

export interface GoProfiles {
  /** Resolves once the profiles under way have been written (at most `chunkSeconds` later). */
  stop(): Promise<string[]>;
}

export async function startGoProfiles(
  dir: string,
  processes: readonly ProfiledProcess[],
  options: { chunkSeconds?: number; onError?: (what: string, error: unknown) => void } = {},
): Promise<GoProfiles> {
  const chunkSeconds = options.chunkSeconds ?? 20;
  await mkdir(dir, { recursive: true });
  let stopped = false;
  const written: string[] = [];
  const loops = processes.map(async ({ name, read }) => {
    for (let i = 1; !stopped; i++) {
      try {
        const file = join(dir, `${name}-${i}.pb.gz`);
        await writeFile(file, await read(chunkSeconds));
        written.push(file);
      } catch (error) {
        options.onError?.(name, error);
        return;
      }
    }
  });
  return {
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
      return written.sort();
    },
  };
}
