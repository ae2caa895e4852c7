/**
 * `node scripts/code-shape.ts [dir]`: the shape limits of issue 32 (docs/CONVENTIONS.md). Over the non-test,
 * non-generated `.ts` files under `packages/` (or `dir`) it prints every file over 450 lines and every function
 * (declaration, method, arrow function, function expression) whose body spans over 250 lines, measured with the
 * TypeScript compiler API as the body's last line minus its first line plus one (comments and blank lines count).
 * Exits 1 when it printed anything, so it can gate a change.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';

const MAX_FILE_LINES = 450;
const MAX_FUNCTION_LINES = 250;

const root = resolve(import.meta.dirname, '..');
const top = resolve(root, process.argv[2] ?? 'packages');

function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(path);
    else if (/\.ts$/.test(entry.name) && !/\.(test|generated|d)\.ts$/.test(entry.name)) yield path;
  }
}

/** The name a reader would look for: the declaration's, else the variable, property or call it sits in. */
function nameOf(node: ts.Node): string {
  const named = node as ts.Node & { name?: ts.Node };
  if (named.name && ts.isIdentifier(named.name)) return named.name.text;
  const parent = node.parent;
  if (
    ts.isVariableDeclaration(parent) ||
    ts.isPropertyAssignment(parent) ||
    ts.isPropertyDeclaration(parent)
  ) {
    return parent.name.getText();
  }
  if (ts.isCallExpression(parent)) return `<argument of ${parent.expression.getText().slice(0, 40)}>`;
  return '<anonymous>';
}

const findings: string[] = [];
for (const path of sources(top)) {
  const text = readFileSync(path, 'utf8');
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const lineOf = (pos: number) => file.getLineAndCharacterOfPosition(pos).line + 1;
  const name = relative(root, path);
  const lines = text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
  if (lines > MAX_FILE_LINES) findings.push(`file      ${name}: ${lines} lines`);
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const body = node.body as ts.Node;
      const span = lineOf(body.getEnd()) - lineOf(body.getStart(file)) + 1;
      if (span > MAX_FUNCTION_LINES) {
        findings.push(`function  ${name}:${lineOf(node.getStart(file))} ${nameOf(node)}: ${span} lines`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
}
for (const finding of findings) console.log(finding);
console.log(
  `${findings.length} over the limits (files > ${MAX_FILE_LINES} lines, function bodies > ${MAX_FUNCTION_LINES})`,
);
process.exitCode = findings.length > 0 ? 1 : 0;
