/**
 * The real bundle (dist/extension.js, with vscode-languageclient inside) activated in a
 * fake extension host against the real server: the LanguageClient starts the server,
 * the tree fills from notifications, commands run, a mirror shows output, the server
 * restarts, and deactivate ends it.
 */

import assert from 'node:assert/strict';
import childProcess, { ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import type { TerminalRegistryApi } from '../src/api';
import { Emitter } from '../src/events';
import type { DidEndRunParams, Terminal } from '../src/protocol';
import type { RegistryNode } from '../src/tree';
import { FakeHost, FakeTerminal, installFakeVscodeHost } from './helpers/fakeVscodeHost';
import { TEST_SETTINGS, repoRoot, serverArgv, withTimeout } from './helpers/server';

const T = { timeout: 30000 };
const VIEW = 'terminalRegistry.terminals';

// Every server process the LanguageClient starts, so the test can await their exits.
const servers: ChildProcess[] = [];
const serverSpawned = new Emitter<ChildProcess>();
const originalSpawn = childProcess.spawn;
(childProcess as { spawn: typeof childProcess.spawn }).spawn = ((...args: Parameters<typeof childProcess.spawn>) => {
  const child = (originalSpawn as (...a: unknown[]) => ChildProcess)(...args);
  if (Array.isArray(args[1]) && args[1].includes('--stdio')) {
    servers.push(child);
    serverSpawned.fire(child);
  }
  return child;
}) as typeof childProcess.spawn;

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

let host: FakeHost;
let extension: { activate(context: unknown): TerminalRegistryApi; deactivate(): Promise<void> };
let api: TerminalRegistryApi;

before(() => {
  const argv = serverArgv();
  host = installFakeVscodeHost({
    config: {
      'terminalRegistry.server.command': argv.slice(0, -2), // without "serve --stdio"
      'terminalRegistry.server.initializationOptions': TEST_SETTINGS,
    },
    workspaceFolders: [repoRoot()],
  });
  extension = require(path.resolve(__dirname, '..', '..', 'dist', 'extension.js'));
  api = extension.activate({ subscriptions: [] });
});

after(async () => {
  await extension?.deactivate();
  await withTimeout(Promise.all(servers.map(exited)), 15000, 'every server to exit');
  childProcess.spawn = originalSpawn;
}, { timeout: 60000 });

function tree() {
  const view = host.treeViews.get(VIEW);
  assert.ok(view, 'the view is registered');
  return view;
}

/** The tree's terminal nodes, by task label. */
function treeTerminals(): Map<string, Terminal[]> {
  const provider = tree().treeDataProvider;
  const result = new Map<string, Terminal[]>();
  for (const group of provider.getChildren() as RegistryNode[]) {
    if (group.kind !== 'task') continue;
    const children = provider.getChildren(group) as RegistryNode[];
    result.set(
      group.group.label,
      children.flatMap((n) => (n.kind === 'terminal' ? [n.terminal] : [])),
    );
  }
  return result;
}

/** Resolves once `predicate` holds, re-checked on every tree refresh. */
function treeUntil(predicate: () => boolean, what: string): Promise<void> {
  if (predicate()) return Promise.resolve();
  return withTimeout(
    new Promise<void>((resolve) => {
      const sub = tree().treeDataProvider.onDidChangeTreeData(() => {
        if (predicate()) {
          sub.dispose();
          resolve();
        }
      });
    }),
    20000,
    what,
  );
}

function screenOf(terminal: FakeTerminal): { text: () => string; until: (needle: string) => Promise<void> } {
  let text = '';
  const waiters: { needle: string; resolve: () => void }[] = [];
  terminal.pty.onDidWrite((data) => {
    text += data;
    for (const w of waiters.splice(0)) {
      if (text.includes(w.needle)) w.resolve();
      else waiters.push(w);
    }
  });
  return {
    text: () => text,
    until: (needle) =>
      text.includes(needle)
        ? Promise.resolve()
        : withTimeout(new Promise<void>((resolve) => waiters.push({ needle, resolve })), 20000, needle),
  };
}

function command(id: string): (...args: unknown[]) => Promise<void> {
  const handler = host.commands.get(id);
  assert.ok(handler, `${id} is registered`);
  return handler;
}

test('activation registers every command and the view, and starts the server', T, async () => {
  for (const id of [
    'terminalRegistry.runCommand',
    'terminalRegistry.showEnvironmentDetails',
    'terminalRegistry.restartServer',
    'terminalRegistry.showTerminal',
    'terminalRegistry.killCommand',
    'terminalRegistry.closeTerminal',
    'terminalRegistry.copyCwd',
  ]) {
    assert.ok(host.commands.has(id), id);
  }
  assert.equal(api.version, 1);
  // The API waits for the LanguageClient to be up.
  const result = await api.run('cd /tmp && echo via-extension', { taskId: 'ext', cwd: repoRoot() });
  assert.equal(result.output, 'via-extension\n');
  assert.equal(result.cwd, '/tmp');
  assert.equal(tree().message, undefined, 'no "not running" message once running');
  assert.match(host.outputs.get('Terminal Registry') ?? '', /starting .*serve --stdio/);
  await treeUntil(() => treeTerminals().get('ext')?.[0]?.cwd === '/tmp', 'the terminal in the tree with its live cwd');
  // Fresh output makes it hot (a flame); it cools down (hotTimeoutMs: 300) to idle.
  await treeUntil(() => treeTerminals().get('ext')?.[0]?.hot === false, 'the terminal to cool down');
  const item = tree().treeDataProvider.getTreeItem({ kind: 'terminal', terminal: treeTerminals().get('ext')![0] });
  assert.equal(item.contextValue, 'terminal.idle');
  assert.equal((item.iconPath as { id: string }).id, 'terminal');
});

test('Show Terminal mirrors the registry terminal: replay, live output, input', T, async () => {
  const [terminal] = treeTerminals().get('ext')!;
  await command('terminalRegistry.showTerminal')({ kind: 'terminal', terminal });
  assert.equal(host.terminals.length, 1);
  const mirror = host.terminals[0];
  assert.equal(mirror.name, `Registry ${terminal.id}: ext`);
  const screen = screenOf(mirror);
  mirror.pty.open({ columns: 90, rows: 20 });
  await screen.until('via-extension');
  await api.run('echo $((1000+234))', { taskId: 'ext', cwd: '/tmp' });
  await screen.until('1234');
  // Showing it again focuses the same mirror.
  await command('terminalRegistry.showTerminal')({ kind: 'terminal', terminal });
  assert.equal(host.terminals.length, 1);
  assert.equal(mirror.shown, 2);
  // Typing at the idle prompt runs a command, as in any terminal.
  mirror.pty.handleInput?.('echo typed-$((2+3))\r');
  await screen.until('typed-5');
  host.closeTerminal(mirror);
  const still = await api.acquire('/tmp', 'ext');
  assert.equal(still.id, terminal.id, 'closing the mirror left the registry terminal alone');
});

test('Run Command asks task, cwd and command, then reports exit code and output', T, async () => {
  host.inputAnswers.push('ext-cmd', '/tmp', 'echo from-command; cd /');
  const messageSeen = new Promise<string>((resolve) => {
    const sub = host.onMessage.event((text) => {
      if (text.includes('from-command')) {
        sub.dispose();
        resolve(text);
      }
    });
  });
  await command('terminalRegistry.runCommand')();
  const text = await withTimeout(messageSeen, 5000, 'the result message');
  assert.match(text, /exit code 0 \(completed\), cwd \/$/);
  const log = host.outputs.get('Terminal Registry Runs') ?? '';
  assert.match(log, /\$ echo from-command; cd \/ .*\nfrom-command\n\[exit code 0 · completed · cwd \/ · \d+ ms\]/);
});

test('Show Environment Details opens the report as a read-only document in a markdown preview', T, async () => {
  const ended = new Promise<DidEndRunParams>((resolve) => {
    const sub = api.onDidEndRun((event) => {
      sub.dispose();
      resolve(event);
    });
  });
  await api.run('echo env-$((5*5))', { taskId: 'ext-env', cwd: '/tmp', background: true });
  await withTimeout(ended, 20000, 'the background run to end');
  host.inputAnswers.push('ext-env');
  await command('terminalRegistry.showEnvironmentDetails')();
  // No untitled document: it would stay as an unsaved tab that asks to be saved on close.
  assert.deepEqual(host.documents, []);
  const preview = host.executed.at(-1);
  assert.equal(preview?.command, 'markdown.showPreview');
  const uri = preview?.args[0] as { scheme: string; path: string; toString(): string };
  assert.equal(uri.scheme, 'terminal-registry');
  assert.equal(uri.path, '/Environment details (ext-env).md');
  const provider = host.contentProviders.get(uri.scheme);
  assert.ok(provider, 'a content provider serves the scheme');
  assert.match(await provider.provideTextDocumentContent(uri), /env-25/);
});

test('Copy cwd, Kill and Close act on the terminal of a tree node', T, async () => {
  const [terminal] = treeTerminals().get('ext')!;
  await command('terminalRegistry.copyCwd')({ kind: 'terminal', terminal });
  assert.equal(host.clipboard, '/tmp');

  const killed = new Promise<DidEndRunParams>((resolve) => {
    const sub = api.onDidEndRun((event) => {
      if (event.terminalId === terminal.id) {
        sub.dispose();
        resolve(event);
      }
    });
  });
  const started = await api.run('sleep 30', { taskId: 'ext', cwd: '/tmp', terminalId: terminal.id, background: true });
  await treeUntil(() => treeTerminals().get('ext')?.[0]?.busy === true, 'the terminal to show busy');
  const busyItem = tree().treeDataProvider.getTreeItem({ kind: 'terminal', terminal: treeTerminals().get('ext')![0] });
  assert.equal(busyItem.contextValue, 'terminal.busy');
  await command('terminalRegistry.killCommand')({ kind: 'terminal', terminal });
  const event = await withTimeout(killed, 20000, 'the killed run to end');
  assert.equal(event.runId, started.runId);
  assert.equal(event.state, 'cancelled');

  await command('terminalRegistry.closeTerminal')({ kind: 'terminal', terminal: { ...terminal, busy: false } });
  await treeUntil(() => !treeTerminals().has('ext'), 'the closed terminal to leave the tree');
});

test('Restart Server: a new server, the tree reloaded from it, old mirrors told', T, async () => {
  const before = await api.acquire('/tmp', 'ext-restart');
  await command('terminalRegistry.showTerminal')({ kind: 'terminal', terminal: before });
  const mirror = host.terminals.at(-1)!;
  const screen = screenOf(mirror);
  mirror.pty.open({ columns: 80, rows: 24 });
  const oldServer = servers.at(-1)!;
  await command('terminalRegistry.restartServer')();
  await screen.until('server stopped');
  await withTimeout(exited(oldServer), 15000, 'the old server to exit');
  assert.equal(servers.length, 2);
  // The LanguageClient's own exit listener ran before this test's: a restart asked for
  // is no error (vscode-languageclient logs every exit as one).
  const log = host.outputs.get('Terminal Registry') ?? '';
  assert.doesNotMatch(log, /^\[Error/m, log);
  assert.match(log, /^\[Info .*\] Server process exited with code 0, as asked\.$/m);
  // The new server has its own terminals: the old ones are gone from the tree.
  const after = await api.run('echo restarted', { taskId: 'ext-restart', cwd: '/tmp' });
  assert.equal(after.output, 'restarted\n');
  await treeUntil(() => treeTerminals().get('ext-restart')?.length === 1, 'the new terminal in the tree');
  assert.deepEqual([...treeTerminals().keys()], ['ext-restart']);
});

test('a crashed server is restarted by the LanguageClient, and the tree reloads from the new one', T, async () => {
  const doomed = await api.acquire('/tmp', 'ext-crash');
  await treeUntil(() => treeTerminals().has('ext-crash'), 'the terminal in the tree');
  const crashed = servers.at(-1)!;
  const respawned = new Promise<ChildProcess>((resolve) => {
    const sub = serverSpawned.event((child) => {
      sub.dispose();
      resolve(child);
    });
  });
  crashed.kill('SIGKILL');
  await withTimeout(exited(crashed), 15000, 'the killed server to exit');
  await withTimeout(respawned, 20000, 'the LanguageClient to start a new server');
  // A crash is still an error in the log (only a requested clean exit is not).
  assert.match(host.outputs.get('Terminal Registry') ?? '', /^\[Error .*\] Server process exited with signal SIGKILL\.$/m);
  // The new server knows nothing of the old terminals; the tree follows it.
  const fresh = await api.acquire('/tmp', 'ext-after-crash');
  await treeUntil(
    () => treeTerminals().has('ext-after-crash') && !treeTerminals().has('ext-crash'),
    'the tree to show the new server only',
  );
  assert.equal(fresh.id, 1, `terminal ids start over (the old one was ${doomed.id})`);
});
