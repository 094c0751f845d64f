/**
 * What the end-to-end test takes from this checkout: the built .vsix, and the
 * terminal-registry server of this checkout (never one installed from elsewhere).
 */

import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** vscode-client/ (this file is compiled to vscode-client/out-e2e/). */
export const CLIENT_DIR = path.resolve(__dirname, '..');
export const REPO_ROOT = path.resolve(CLIENT_DIR, '..');

/** The .vsix that `npm run package` built from this checkout. */
export function vsixPath(): string {
  const manifest = JSON.parse(fs.readFileSync(path.join(CLIENT_DIR, 'package.json'), 'utf8')) as { name: string; version: string };
  const file = path.join(CLIENT_DIR, `${manifest.name}-${manifest.version}.vsix`);
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: run npm run package first`);
  return file;
}

/**
 * The value for `terminalRegistry.server.command` (`serve --stdio` is appended by the
 * extension): TERMINAL_REGISTRY_SERVER when set (a JSON array or a command line, as for
 * the unit tests), else `<python> -m protocol.cli` with the interpreter named by
 * TERMINAL_REGISTRY_PYTHON, else the active virtualenv's, else `python3` — once it is
 * shown to import `protocol` from this checkout.
 */
export function serverCommand(): string[] {
  const override = process.env.TERMINAL_REGISTRY_SERVER?.trim();
  if (override) return override.startsWith('[') ? (JSON.parse(override) as string[]) : override.split(/\s+/);
  const venv = process.env.VIRTUAL_ENV;
  const python = process.env.TERMINAL_REGISTRY_PYTHON ?? (venv ? path.join(venv, 'bin', 'python') : 'python3');
  let answer: string;
  try {
    // From a neutral folder, so that `protocol` cannot come from the working directory.
    answer = execFileSync(python, ['-c', 'import sys, protocol.cli as c; print(sys.executable); print(c.__file__)'], {
      cwd: os.tmpdir(),
      encoding: 'utf8',
    });
  } catch (error) {
    throw new Error(
      `${python} cannot import protocol.cli (${error instanceof Error ? error.message : error}): install this checkout ` +
        "with pip install -e '.[test]' into a virtualenv and activate it, or set TERMINAL_REGISTRY_PYTHON",
    );
  }
  const [executable, cliFile] = answer.trim().split('\n');
  const expected = path.join(REPO_ROOT, 'protocol') + path.sep;
  if (!fs.realpathSync(cliFile).startsWith(fs.realpathSync(path.join(REPO_ROOT, 'protocol')) + path.sep)) {
    throw new Error(
      `${python} imports protocol from ${cliFile}, not from this checkout (${expected}): install this checkout ` +
        "with pip install -e '.[test]' into a virtualenv and activate it, or set TERMINAL_REGISTRY_PYTHON",
    );
  }
  return [executable, '-m', 'protocol.cli'];
}
