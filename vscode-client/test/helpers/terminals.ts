import type { Terminal } from '../../src/protocol';

/** A Terminal as the server sends it, with overrides. */
export function makeTerminal(overrides: Partial<Terminal> & { id: number }): Terminal {
  return {
    provider: 'shell',
    taskId: 't1',
    cwd: '/repo',
    busy: false,
    hot: false,
    shellIntegration: 'rich',
    shell: '/bin/bash',
    pid: 1000 + overrides.id,
    lastCommand: null,
    ...overrides,
  };
}
