/**
 * A TCP proxy on a loopback port in front of another server (the chaos tier puts one between each process and
 * each server it talks to: PostgreSQL, the API server, the Git server), with the faults a network between them
 * can have:
 *
 *   pass   new connections are forwarded to the target (the default);
 *   hang   new connections are accepted and held: nothing is forwarded and nothing is answered, as when
 *          the way to the server is blocked. Back in `pass`, the held connections are forwarded then, as a
 *          client's handshake goes through once a short partition heals;
 *   cut()  destroys every connection open now (forwarded or held), as a dropped route or a restarted
 *          firewall does; the mode does not change;
 *   setLatency(ms)  every chunk of every forwarded connection (open ones too), in either direction, is
 *          delivered `ms` after it arrived, in order, as over a slow or distant link (0: at once, the default).
 */
import { createConnection, createServer, type Socket } from 'node:net';

export type TcpProxyMode = 'pass' | 'hang';

export interface TcpProxy {
  /** The loopback port the proxy listens on. */
  readonly port: number;
  readonly mode: TcpProxyMode;
  setMode(mode: TcpProxyMode): void;
  /** Destroys every open connection; returns how many there were. */
  cut(): number;
  /** Delays every forwarded chunk, both ways, by `ms` (0: none). */
  setLatency(ms: number): void;
  readonly latencyMs: number;
  /** Connections open now: forwarded, and held by `hang`. */
  readonly open: { forwarded: number; held: number };
  /** Connections accepted since the start. */
  readonly accepted: number;
  stop(): Promise<void>;
}

/** Starts a proxy on 127.0.0.1 (a free port unless `port` is given) in front of `target`. */
export async function startTcpProxy(options: {
  target: { host: string; port: number };
  port?: number;
}): Promise<TcpProxy> {
  let mode: TcpProxyMode = 'pass';
  let latencyMs = 0;
  let accepted = 0;
  /** Client socket → its socket to the target (forwarded connections). */
  const forwarded = new Map<Socket, Socket>();
  const held = new Set<Socket>();

  /**
   * Copies `from` to `to`: at once without latency (with back-pressure, as pipe() does), else each chunk
   * `latencyMs` after it arrived, never overtaking one still waiting.
   */
  const relay = (from: Socket, to: Socket) => {
    const waiting: { due: number; chunk: Buffer }[] = [];
    let timer: NodeJS.Timeout | undefined;
    let ended = false;
    const flush = () => {
      timer = undefined;
      const now = Date.now();
      while (waiting.length > 0 && (waiting[0]?.due ?? 0) <= now) {
        const next = waiting.shift();
        if (next && !to.destroyed) to.write(next.chunk);
      }
      if (waiting.length > 0) timer = setTimeout(flush, (waiting[0]?.due ?? now) - now);
      else if (ended && !to.destroyed) to.end();
    };
    from.on('data', (chunk: Buffer) => {
      if (latencyMs === 0 && waiting.length === 0) {
        if (!to.write(chunk)) {
          from.pause();
          to.once('drain', () => from.resume());
        }
        return;
      }
      waiting.push({ due: Date.now() + latencyMs, chunk });
      timer ??= setTimeout(flush, latencyMs);
    });
    from.on('end', () => {
      ended = true;
      if (waiting.length === 0 && !to.destroyed) to.end();
    });
    from.on('close', () => clearTimeout(timer));
  };

  const forward = (client: Socket) => {
    const upstream = createConnection(options.target.port, options.target.host);
    forwarded.set(client, upstream);
    const close = () => {
      forwarded.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close);
    upstream.on('error', close);
    client.on('close', close);
    upstream.on('close', close);
    relay(client, upstream);
    relay(upstream, client);
    // Held connections were paused; data they sent meanwhile flows now.
    client.resume();
  };

  const server = createServer({ pauseOnConnect: true }, (client) => {
    accepted++;
    client.setNoDelay(true);
    if (mode === 'pass') {
      forward(client);
      return;
    }
    held.add(client);
    const drop = () => {
      held.delete(client);
      client.destroy();
    };
    client.on('error', drop);
    client.on('close', drop);
  });
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolveListen());
  });
  const address = server.address();
  if (!address || typeof address !== 'object') throw new Error('the TCP proxy has no address');

  const cut = () => {
    const count = forwarded.size + held.size;
    for (const [client, upstream] of [...forwarded]) {
      client.destroy();
      upstream.destroy();
    }
    forwarded.clear();
    for (const client of [...held]) client.destroy();
    held.clear();
    return count;
  };

  return {
    port: address.port,
    get mode() {
      return mode;
    },
    setMode(next) {
      mode = next;
      if (next === 'pass') {
        const waiting = [...held];
        held.clear();
        for (const client of waiting) {
          client.removeAllListeners('error');
          client.removeAllListeners('close');
          if (!client.destroyed) forward(client);
        }
      }
    },
    cut,
    setLatency(ms) {
      latencyMs = Math.max(0, ms);
    },
    get latencyMs() {
      return latencyMs;
    },
    get open() {
      return { forwarded: forwarded.size, held: held.size };
    },
    get accepted() {
      return accepted;
    },
    async stop() {
      cut();
      await new Promise<void>((resolveClose) => server.close(() => resolveClose()));
    },
  };
}
