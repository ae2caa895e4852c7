import { request } from 'node:https';

export interface KubeEndpoint {
  server: string;
  token: string;
  /** PEM bundle that signs the API server's certificate. */
  ca: string;
}

export interface KubeResponse {
  status: number;
  body: unknown;
}

/** One raw request to the API server; the harness uses it before any client is configured. */
export function kubeRequest(
  endpoint: KubeEndpoint,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<KubeResponse> {
  const url = new URL(path, endpoint.server);
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolveResponse, reject) => {
    const req = request(
      url,
      {
        method,
        ca: endpoint.ca,
        headers: {
          authorization: `Bearer ${endpoint.token}`,
          accept: 'application/json',
          ...(payload !== undefined
            ? { 'content-type': contentType, 'content-length': Buffer.byteLength(payload) }
            : {}),
        },
        timeout: 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // plain-text bodies (e.g. /readyz) stay strings
          }
          resolveResponse({ status: res.statusCode ?? 0, body: parsed });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timeout`)));
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}
