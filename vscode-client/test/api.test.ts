/** The API for other extensions (src/api.ts), against the real server. */

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { API_VERSION, DidEndRunParams, InvalidParamsError, TerminalRegistryApi, createApi } from '../src/api';
import { ServerHandle, startServer, withTimeout } from './helpers/server';

const T = { timeout: 30000 };

let server: ServerHandle;
let api: TerminalRegistryApi;

before(async () => {
  server = await startServer();
  api = createApi(server.client);
}, { timeout: 60000 });

after(async () => {
  const code = await server?.stop();
  assert.equal(code, 0, server?.stderr());
}, { timeout: 60000 });

test('the API: acquire, run (reusing the terminal), onDidEndRun, environmentDetails, release', T, async () => {
  assert.equal(api.version, API_VERSION);
  const ends: DidEndRunParams[] = [];
  const listener = api.onDidEndRun((event) => ends.push(event));

  const terminal = await api.acquire('/tmp', 'api-task');
  assert.equal(terminal.taskId, 'api-task');
  assert.equal(terminal.cwd, '/tmp');

  const result = await api.run('echo api-$((1+1))', { taskId: 'api-task', cwd: '/tmp' });
  assert.equal(result.output, 'api-2\n');
  assert.equal(result.exitCode, 0);
  assert.equal(result.terminalId, terminal.id, 'the task\'s idle terminal in /tmp is reused');

  // onDidEndRun fires for a background run, whose end is not in its answer.
  const bgEnded = new Promise<DidEndRunParams>((resolve) => {
    const sub = api.onDidEndRun((event) => {
      if (event.terminalId === terminal.id && event.runId > result.runId) {
        sub.dispose();
        resolve(event);
      }
    });
  });
  const bg = await api.run('sleep 0.2; echo api-bg-$((3*3))', {
    taskId: 'api-task',
    cwd: '/tmp',
    background: true,
    env: { API_TEST: '1' },
  });
  assert.equal(bg.state, 'running');
  const ended = await withTimeout(bgEnded, 20000, 'onDidEndRun');
  assert.equal(ended.runId, bg.runId);
  assert.equal(ended.exitCode, 0);
  assert.ok(ends.some((e) => e.runId === result.runId && e.exitCode === 0), 'the foreground run ended too');

  const details = await api.environmentDetails('api-task', { cooldownTimeoutMs: 2000 });
  assert.match(details.markdown, /api-bg-9/);

  await api.release('api-task');
  const released = await server.client.get(terminal.id);
  assert.equal(released.taskId, null);

  // A disposed listener hears nothing more.
  listener.dispose();
  const count = ends.length;
  await api.run('true', { taskId: 'api-other', cwd: '/tmp' });
  assert.equal(ends.length, count);
});

test('the API: a cwd that does not exist is an InvalidParamsError', T, async () => {
  await assert.rejects(api.run('true', { taskId: 'api-err', cwd: '/definitely/not/here' }), InvalidParamsError);
});

test('the API: env reaches the command; timeoutMs interrupts it', T, async () => {
  const withEnv = await api.run('echo "$GREETING"', {
    taskId: 'api-env',
    cwd: '/tmp',
    provider: 'subprocess',
    env: { GREETING: 'hello-env' },
  });
  assert.equal(withEnv.output, 'hello-env\n');
  const slow = await api.run('sleep 20', { taskId: 'api-env', cwd: '/tmp', timeoutMs: 300 });
  assert.equal(slow.state, 'timedOut');
});
