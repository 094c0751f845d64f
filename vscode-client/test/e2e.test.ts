/**
 * End to end against the real Python server over stdio, driven through src/client.ts
 * and src/mirror.ts exactly as the extension drives them.
 */

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  InvalidParamsError,
  MethodNotFoundError,
  RegistryError,
  TerminalRegistryClient,
  UnknownTerminalError,
  toRegistryError,
} from '../src/client';
import { Emitter } from '../src/events';
import { TerminalMirror } from '../src/mirror';
import { TerminalModel } from '../src/model';
import { NotificationRecorder, ServerHandle, startServer, withTimeout } from './helpers/server';

const T = { timeout: 30000 };

let server: ServerHandle;
let client: TerminalRegistryClient;

before(async () => {
  server = await startServer();
  client = server.client;
}, { timeout: 60000 });

after(async () => {
  const code = await server?.stop();
  assert.equal(code, 0, `the server should exit 0 after shutdown + exit; its log:\n${server?.stderr()}`);
}, { timeout: 60000 });

/** Occurrences of `needle` in `haystack`. */
function count(haystack: string, needle: string): number {
  return haystack.split(needle).length - 1;
}

describe('terminal-registry over stdio', () => {
  test('initialize announces protocol version 1', T, () => {
    const info = server.initializeResult.capabilities.experimental?.terminalRegistry;
    assert.ok(info, 'capabilities.experimental.terminalRegistry');
    assert.equal(info.version, 1);
    assert.ok(info.providers.includes('shell'));
    assert.equal(server.initializeResult.serverInfo?.name, 'terminal-registry');
  });

  test('run: output, exit code, live cwd, and the notifications of the run', T, async () => {
    const recorder = new NotificationRecorder(client);
    try {
      const result = await client.run('cd /tmp && echo hi', { cwd: '/', taskId: 'e2e-run' });
      assert.equal(result.state, 'completed');
      assert.equal(result.exitCode, 0);
      assert.equal(result.signal, null);
      assert.equal(result.output, 'hi\n');
      assert.equal(result.cwd, '/tmp');
      assert.equal(result.commandLine, 'cd /tmp && echo hi');
      assert.equal(result.truncated, false);

      const opened = await recorder.waitFor('terminal/didOpen', (t) => t.id === result.terminalId);
      assert.equal(opened.taskId, 'e2e-run');
      assert.equal(opened.provider, 'shell');
      const started = await recorder.waitFor('terminal/didStartRun', (p) => p.runId === result.runId);
      assert.deepEqual(started, { terminalId: result.terminalId, runId: result.runId, commandLine: 'cd /tmp && echo hi' });
      const ended = await recorder.waitFor('terminal/didEndRun', (p) => p.runId === result.runId);
      assert.equal(ended.terminalId, result.terminalId);
      assert.equal(ended.state, 'completed');
      assert.equal(ended.exitCode, 0);
      // The run's output reached the mirrors before its didEndRun.
      const runWrites = recorder.all('terminal/didWrite', (p) => p.runId === result.runId);
      assert.match(runWrites.map((p) => p.data).join(''), /hi\r?\n/);
      // And the terminal now stands in /tmp, as a didChange said.
      const changed = await recorder.waitFor('terminal/didChange', (t) => t.id === result.terminalId && t.cwd === '/tmp');
      assert.equal(changed.lastCommand, 'cd /tmp && echo hi');
      const now = await client.get(result.terminalId);
      assert.equal(now.cwd, '/tmp');
      assert.equal(now.busy, false);
    } finally {
      recorder.dispose();
    }
  });

  test('a failing command reports its exit code', T, async () => {
    const result = await client.run('exit 3', { cwd: '/tmp', taskId: 'e2e-fail', provider: 'subprocess' });
    assert.equal(result.exitCode, 3);
    assert.equal(result.state, 'completed');
  });

  test('errors: each JSON-RPC code becomes its error class', T, async () => {
    await assert.rejects(client.get(99999), (error: unknown) => {
      assert.ok(error instanceof UnknownTerminalError);
      assert.ok(error instanceof RegistryError);
      assert.equal(error.code, -32001);
      assert.match(error.message, /unknown terminal 99999/);
      return true;
    });
    await assert.rejects(client.run('true', { cwd: '/no/such/dir/here', taskId: 'e2e-err' }), (error: unknown) => {
      assert.ok(error instanceof InvalidParamsError);
      assert.equal(error.code, -32602);
      assert.match(error.message, /does not exist/);
      return true;
    });
    // A method the server does not have, sent below the typed layer.
    await assert.rejects(
      server.connection.sendRequest('terminal/frobnicate', {}).catch((e: unknown) => {
        throw toRegistryError(e);
      }),
      (error: unknown) => error instanceof MethodNotFoundError && error.code === -32601,
    );
  });

  test('background run, then environment details report its output', T, async () => {
    const recorder = new NotificationRecorder(client);
    try {
      const started = await client.run('sleep 0.3; echo bg-done-$((40+2))', {
        cwd: '/tmp',
        taskId: 'e2e-bg',
        background: true,
      });
      assert.equal(started.state, 'running');
      assert.equal(started.exitCode, null);
      const ended = await recorder.waitFor('terminal/didEndRun', (p) => p.runId === started.runId);
      assert.equal(ended.exitCode, 0);
      const details = await client.environmentDetails('e2e-bg');
      assert.match(details.markdown, /bg-done-42/);
      assert.ok(details.terminals.some((t) => t.id === started.terminalId));
      // Reported output counts as retrieved: not reported again.
      const again = await client.environmentDetails('e2e-bg');
      assert.doesNotMatch(again.markdown, /bg-done-42/);
    } finally {
      recorder.dispose();
    }
  });

  test('kill interrupts a running command; the terminal lives on', T, async () => {
    const recorder = new NotificationRecorder(client);
    try {
      const started = await client.run('sleep 30', { cwd: '/tmp', taskId: 'e2e-kill', background: true });
      await client.kill(started.terminalId);
      const ended = await recorder.waitFor('terminal/didEndRun', (p) => p.runId === started.runId);
      assert.equal(ended.state, 'cancelled');
      const after = await client.run('echo alive', { terminalId: started.terminalId });
      assert.equal(after.output, 'alive\n');
    } finally {
      recorder.dispose();
    }
  });

  test('list, output, release and close', T, async () => {
    const recorder = new NotificationRecorder(client);
    try {
      const terminal = await client.acquire('/tmp', 'e2e-list');
      assert.equal(terminal.taskId, 'e2e-list');
      const listed = await client.list({ taskId: 'e2e-list' });
      assert.deepEqual(
        listed.map((t) => t.id),
        [terminal.id],
      );
      const bg = await client.run('echo out-$((2*21))', { terminalId: terminal.id, background: true });
      await recorder.waitFor('terminal/didEndRun', (p) => p.runId === bg.runId);
      assert.match(await client.output(terminal.id), /out-42/);
      assert.equal(await client.output(terminal.id), '');

      await client.release('e2e-list');
      assert.equal((await client.get(terminal.id)).taskId, null);

      await client.close(terminal.id);
      await recorder.waitFor('terminal/didClose', (p) => p.terminalId === terminal.id);
      await assert.rejects(client.get(terminal.id), UnknownTerminalError);
    } finally {
      recorder.dispose();
    }
  });

  test('the model follows terminal/list and the notifications', T, async () => {
    const model = new TerminalModel();
    const attached = model.attach(client);
    try {
      assert.equal(await model.reload(client), true);
      const before = model.size;
      assert.ok(before >= 1);
      const terminal = await client.acquire('/', 'e2e-model', 'subprocess');
      assert.equal(model.get(terminal.id)?.taskId, 'e2e-model');
      assert.ok(model.groups().some((g) => g.taskId === 'e2e-model'));
      const closed = new Promise<void>((resolve) => {
        const sub = model.onDidChange(() => {
          if (!model.get(terminal.id)) {
            sub.dispose();
            resolve();
          }
        });
      });
      await client.close(terminal.id);
      await withTimeout(closed, 20000, 'the model to drop the closed terminal');
      assert.equal(model.size, before);
    } finally {
      attached.dispose();
      model.dispose();
    }
  });

  test('mirror: the replay, then live output, each byte once; input; resize; close', T, async () => {
    const recorder = new NotificationRecorder(client);
    const terminal = await client.acquire('/tmp', 'e2e-mirror');
    const first = await client.run('echo $((123456+654321))', { terminalId: terminal.id });
    assert.equal(first.output, '777777\n');

    let screen = '';
    let closed = 0;
    const screenChanged = new Emitter<void>();
    const mirror = new TerminalMirror(client, terminal.id, {
      onData: (text) => {
        screen += text;
        screenChanged.fire();
      },
      onClose: () => closed++,
    });
    const until = (predicate: () => boolean, what: string): Promise<void> => {
      if (predicate()) return Promise.resolve();
      return withTimeout(
        new Promise<void>((resolve) => {
          const sub = screenChanged.event(() => {
            if (predicate()) {
              sub.dispose();
              resolve();
            }
          });
        }),
        20000,
        what,
      );
    };

    try {
      assert.equal(mirror.state, 'new');
      const opening = mirror.open({ cols: 100, rows: 30 });
      assert.equal(mirror.state, 'opening');
      await opening;
      assert.equal(mirror.state, 'live');
      // The replay repainted what ran before the mirror opened.
      assert.equal(count(screen, '777777'), 1, `replay:\n${JSON.stringify(screen)}`);

      // Live output after the replay, exactly once.
      const second = await client.run('echo $((200000+88888))', { terminalId: terminal.id });
      assert.equal(second.output, '288888\n');
      await until(() => screen.includes('288888'), 'live output in the mirror');
      assert.equal(count(screen, '288888'), 1);
      assert.equal(count(screen, '777777'), 1);

      // The mirror's resize reached the PTY (it was opened at 100x30).
      const size = await client.run('stty size', { terminalId: terminal.id });
      assert.equal(size.output.trim(), '30 100');

      // Input typed into the mirror answers a program waiting on stdin. It is typed once
      // `read` shows its prompt ("q42:", which the echoed command line does not contain):
      // typed earlier, bash's readline may still be reading and swallow it as typeahead.
      const waiting = client.run('read -p "q$((40+2)):" x; echo got:$x', { terminalId: terminal.id, timeoutMs: 15000 });
      await until(() => screen.includes('q42:'), 'the prompt of read');
      mirror.write('hello\r');
      const answered = await waiting;
      assert.equal(answered.exitCode, 0);
      assert.match(answered.output, /got:hello/);
      await until(() => screen.includes('got:hello'), 'the answer in the mirror');

      // Closing the registry terminal ends the mirror with a notice.
      await client.close(terminal.id);
      await until(() => mirror.state === 'closed', 'the mirror to close');
      assert.equal(closed, 1);
      assert.match(screen, /registry terminal closed/);
    } finally {
      mirror.dispose();
      recorder.dispose();
    }
  });

  test('closing a mirror leaves the registry terminal alone', T, async () => {
    const terminal = await client.acquire('/tmp', 'e2e-mirror-2');
    let screen = '';
    const mirror = new TerminalMirror(client, terminal.id, { onData: (t) => (screen += t), onClose: () => undefined });
    await mirror.open();
    assert.equal(mirror.state, 'live');
    mirror.dispose();
    assert.equal(mirror.state, 'closed');
    const still = await client.get(terminal.id);
    assert.equal(still.id, terminal.id);
    const result = await client.run('echo still-here', { terminalId: terminal.id });
    assert.equal(result.output, 'still-here\n');
    assert.doesNotMatch(screen, /still-here/);
  });

  test('a mirror of an unknown terminal closes at once, saying why', T, async () => {
    let screen = '';
    let closed = false;
    const mirror = new TerminalMirror(client, 424242, { onData: (t) => (screen += t), onClose: () => (closed = true) });
    await mirror.open();
    assert.equal(mirror.state, 'closed');
    assert.ok(closed);
    assert.match(screen, /cannot mirror terminal 424242: unknown terminal/);
  });
});
