import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { eventually } from '@gitops/shared/testing';
import { afterEach, describe, it } from 'vitest';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';

/** A server that answers every chunk with `echo:<chunk>` and counts the connections it got. */
async function echoServer(): Promise<{
  server: Server;
  port: number;
  connections: () => number;
  dropAll: () => void;
}> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('data', (chunk) => socket.write(`echo:${chunk.toString()}`));
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  assert.ok(address && typeof address === 'object');
  return {
    server,
    port: address.port,
    connections: () => connections,
    dropAll: () => {
      for (const socket of sockets) socket.destroy();
    },
  };
}

async function connect(port: number): Promise<{ socket: Socket; received: () => string }> {
  const socket = createConnection(port, '127.0.0.1');
  let received = '';
  socket.on('data', (chunk) => {
    received += chunk.toString();
  });
  socket.on('error', () => {});
  await once(socket, 'connect');
  return { socket, received: () => received };
}

describe('the TCP proxy in front of a server', () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const start = async (): Promise<{ proxy: TcpProxy; target: Awaited<ReturnType<typeof echoServer>> }> => {
    const target = await echoServer();
    cleanups.push(() => new Promise<void>((r) => target.server.close(() => r())));
    const proxy = await startTcpProxy({ target: { host: '127.0.0.1', port: target.port } });
    cleanups.push(() => proxy.stop());
    return { proxy, target };
  };

  it('forwards both ways in pass mode', async () => {
    const { proxy, target } = await start();
    const client = await connect(proxy.port);
    cleanups.push(() => void client.socket.destroy());
    client.socket.write('hello');
    await eventually('the answer', async () => (client.received() === 'echo:hello' ? true : undefined));
    assert.equal(target.connections(), 1);
    assert.deepEqual(proxy.open, { forwarded: 1, held: 0 });
  });

  it('holds new connections in hang mode without reaching the server, and forwards them once back in pass', async () => {
    const { proxy, target } = await start();
    proxy.setMode('hang');
    const client = await connect(proxy.port);
    cleanups.push(() => void client.socket.destroy());
    client.socket.write('waiting');
    await eventually('the proxy to hold the connection', async () =>
      proxy.open.held === 1 ? true : undefined,
    );
    assert.equal(target.connections(), 0);
    assert.equal(client.received(), '');

    proxy.setMode('pass');
    await eventually('the held request to be answered', async () =>
      client.received() === 'echo:waiting' ? true : undefined,
    );
    assert.equal(target.connections(), 1);
    assert.deepEqual(proxy.open, { forwarded: 1, held: 0 });
  });

  it('cut() closes every open connection, forwarded or held, and new ones still work', async () => {
    const { proxy } = await start();
    const forwarded = await connect(proxy.port);
    await eventually('the forwarded connection', async () => (proxy.open.forwarded === 1 ? true : undefined));
    proxy.setMode('hang');
    const held = await connect(proxy.port);
    await eventually('the held connection', async () => (proxy.open.held === 1 ? true : undefined));

    const closed = Promise.all([once(forwarded.socket, 'close'), once(held.socket, 'close')]);
    assert.equal(proxy.cut(), 2);
    await closed;
    assert.deepEqual(proxy.open, { forwarded: 0, held: 0 });

    proxy.setMode('pass');
    const next = await connect(proxy.port);
    cleanups.push(() => void next.socket.destroy());
    next.socket.write('again');
    await eventually('a new connection to work', async () =>
      next.received() === 'echo:again' ? true : undefined,
    );
    assert.equal(proxy.accepted, 3);
  });

  it('with a latency, delivers every chunk both ways, in order, no sooner than the latency each way; without one, at once again', async () => {
    const { proxy } = await start();
    const client = await connect(proxy.port);
    cleanups.push(() => void client.socket.destroy());
    proxy.setLatency(150);
    assert.equal(proxy.latencyMs, 150);
    const sent = Date.now();
    for (const word of ['a', 'b', 'c', 'd']) client.socket.write(word);
    await eventually('every answer, in order', async () =>
      client.received() === 'echo:aecho:becho:cecho:d' || client.received() === 'echo:abcd'
        ? true
        : undefined,
    );
    // Held on the way there and on the way back: the answer cannot be there before twice the latency.
    assert.ok(Date.now() - sent >= 300, `answered after ${Date.now() - sent} ms`);

    proxy.setLatency(0);
    client.socket.write('e');
    await eventually('the next answer', async () =>
      client.received().endsWith('echo:e') ? true : undefined,
    );
    assert.deepEqual(proxy.open, { forwarded: 1, held: 0 });
  });

  it('closes the client side when the server goes away', async () => {
    const { proxy, target } = await start();
    const client = await connect(proxy.port);
    client.socket.write('x');
    await eventually('the answer', async () => (client.received() === 'echo:x' ? true : undefined));
    const closed = once(client.socket, 'close');
    target.dropAll();
    await closed;
    assert.deepEqual(proxy.open, { forwarded: 0, held: 0 });
  });
});
