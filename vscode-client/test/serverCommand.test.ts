import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveServerCommand } from '../src/serverCommand';

const none = () => false;

test('automatic: the workspace .venv, then venv, then terminal-registry on PATH', () => {
  assert.deepEqual(resolveServerCommand('', ['/ws'], none), { command: 'terminal-registry', args: ['serve', '--stdio'] });
  assert.deepEqual(resolveServerCommand(undefined, [], none).command, 'terminal-registry');
  const both = (file: string) => file === '/ws/.venv/bin/terminal-registry' || file === '/ws/venv/bin/terminal-registry';
  assert.equal(resolveServerCommand('', ['/ws'], both).command, '/ws/.venv/bin/terminal-registry');
  const venv = (file: string) => file === '/b/venv/bin/terminal-registry';
  assert.equal(resolveServerCommand('  ', ['/a', '/b'], venv).command, '/b/venv/bin/terminal-registry');
});

test('a string is one executable; an array is an argument list; serve --stdio is appended', () => {
  assert.deepEqual(resolveServerCommand('/opt/my tools/terminal-registry', ['/ws'], () => true), {
    command: '/opt/my tools/terminal-registry',
    args: ['serve', '--stdio'],
  });
  assert.deepEqual(resolveServerCommand(['python3', '-m', 'protocol.cli'], [], none), {
    command: 'python3',
    args: ['-m', 'protocol.cli', 'serve', '--stdio'],
  });
  assert.equal(resolveServerCommand([], [], none).command, 'terminal-registry');
  assert.equal(resolveServerCommand(42, [], none).command, 'terminal-registry');
});
