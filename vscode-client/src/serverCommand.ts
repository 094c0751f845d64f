/**
 * Which server to start: the `terminalRegistry.server.command` setting, else the
 * workspace's virtualenv, else `terminal-registry` on PATH. No `vscode` import, so the
 * rule is unit-tested.
 */

import * as path from 'node:path';

export const SERVER_ARGS: readonly string[] = ['serve', '--stdio'];

export interface ServerCommand {
  command: string;
  args: string[];
}

/** Where a workspace keeps its virtualenv's entry point, in order of preference. */
export const VENV_CANDIDATES: readonly string[] = [
  path.join('.venv', 'bin', 'terminal-registry'),
  path.join('venv', 'bin', 'terminal-registry'),
];

/**
 * @param setting the setting's value: a string (one executable path), an argument list
 *   (`["python3", "-m", "protocol.cli"]`), or empty for automatic.
 * @param workspaceFolders file-system paths of the workspace folders, first first.
 * @param isExecutable whether a path is an executable file.
 */
export function resolveServerCommand(
  setting: unknown,
  workspaceFolders: readonly string[],
  isExecutable: (file: string) => boolean,
): ServerCommand {
  if (Array.isArray(setting)) {
    const parts = setting.filter((part): part is string => typeof part === 'string' && part !== '');
    if (parts.length > 0) return { command: parts[0], args: [...parts.slice(1), ...SERVER_ARGS] };
  } else if (typeof setting === 'string' && setting.trim() !== '') {
    // A single string is one executable (paths may contain spaces): no shell splitting.
    return { command: setting.trim(), args: [...SERVER_ARGS] };
  }
  for (const folder of workspaceFolders) {
    for (const candidate of VENV_CANDIDATES) {
      const file = path.join(folder, candidate);
      if (isExecutable(file)) return { command: file, args: [...SERVER_ARGS] };
    }
  }
  return { command: 'terminal-registry', args: [...SERVER_ARGS] };
}
