/**
 * A one-function double of the API server, for answers a real one never gives (a throttling storm, a body
 * that is not an object, a token refused once): an HTTP server on a free port answering with `answer`, and a
 * KubeConfig pointing at it. The real API server is what every integration test uses; this is only for those.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

export interface ApiServerDouble {
  /** A KubeConfig whose current context points at the double (token `t`, or `users` as given). */
  readonly kc: KubeConfig;
  close(): Promise<void>;
}

export async function startApiServerDouble(
  answer: (req: IncomingMessage, res: ServerResponse) => void,
  options: { user?: Parameters<KubeConfig['loadFromOptions']>[0]['users'][number] } = {},
): Promise<ApiServerDouble> {
  const server = createServer(answer);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [options.user ?? { name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: options.user?.name ?? 'u' }],
    currentContext: 'x',
  });
  return { kc, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
