/**
 * What the CLI prints: aligned tables for people, JSON or YAML for scripts (`-o`), ages, and the one place every
 * line goes through before it is written, which removes secrets (docs/admin-cli.md: no secret is ever printed).
 */
import { REDACTED, scrubString } from '@gitops/shared';
import { stringify as toYamlText } from 'yaml';

/** `-o`: kubectl's names; `table` is the default (kubectl has no name for it). */
export const outputFormats = ['table', 'wide', 'json', 'yaml'] as const;
export type OutputFormat = (typeof outputFormats)[number];

export const isOutputFormat = (value: string): value is OutputFormat =>
  (outputFormats as readonly string[]).includes(value);

/** `-o json` and `-o yaml` print one document of the command's data instead of lines for people. */
export const isStructured = (format: OutputFormat): format is 'json' | 'yaml' =>
  format === 'json' || format === 'yaml';

/** The command's data as `-o json` or `-o yaml` prints it (the same fields either way). */
export function formatStructured(format: 'json' | 'yaml', value: unknown): string {
  return format === 'json' ? toJson(value) : toYamlText(value, { lineWidth: 0 }).trimEnd();
}

/** Where a command writes: stdout for results, stderr for errors and notes. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
}

/**
 * Wraps `write` so that whatever passes it is scrubbed: connection strings with a password, `password=`,
 * bearer tokens and private keys (the logger's scrubString), and every exact secret value the CLI was
 * configured with (the database password, the encryption keys). A last line of defence: commands never
 * format a secret on purpose (the one exception, `instances admit`'s connection string, is written around it:
 * CommandInput.revealOnce).
 */
export function redactingWriter(write: (text: string) => void, secrets: () => readonly string[]) {
  return (text: string) => {
    let safe = scrubString(text);
    for (const secret of secrets()) {
      if (secret.length >= 4) safe = safe.split(secret).join(REDACTED);
    }
    write(safe);
  };
}

/** Columns padded to the widest cell, two spaces apart (kubectl's look); the last column is not padded. */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('   ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** One line of at most `max` characters (line breaks become spaces), with `…` when cut. */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, Math.max(0, max - 1))}…`;
}

/** kubectl's age: `45s`, `12m`, `3h`, `5d` (the largest unit). */
export function formatAge(since: Date | string | null | undefined, now = Date.now()): string {
  if (since === null || since === undefined) return '-';
  const ms = now - new Date(since).getTime();
  if (!Number.isFinite(ms)) return '-';
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  return `${Math.floor(h / 24)}d`;
}

/** Pretty JSON with a trailing newline-free body (the writer adds lines). */
export function toJson(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
