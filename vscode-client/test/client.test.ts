/** src/client.ts over an in-memory connection: params on the wire, errors, notification fan-out. */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  InternalError,
  InvalidParamsError,
  InvalidRequestError,
  MethodNotFoundError,
  ParseError,
  RegistryError,
  RequestCancelledError,
  SpawnFailedError,
  TerminalBusyError,
  TerminalRegistryClient,
  UnknownTerminalError,
  toRegistryError,
} from '../src/client';
import { ErrorCode } from '../src/protocol';
import { FakeConnection, responseError } from './helpers/fakeConnection';

test('requests send one explicit params object, never undefined, and no token unless given', async () => {
  const connection = new FakeConnection();
  const client = new TerminalRegistryClient(connection);
  connection.responders.set('terminal/replay', () => ({ data: '' }));
  await client.list();
  await client.environmentDetails();
  await client.acquire('/tmp', 't1');
  await client.replay(3);
  await client.run('make', { cwd: '/repo', taskId: 't1', timeoutMs: undefined });
  for (const request of connection.requests) {
    assert.equal(request.args.length, 1, `${request.method} got ${request.args.length} arguments`);
    assert.equal(typeof request.args[0], 'object');
    assert.notEqual(request.args[0], null);
    for (const [key, value] of Object.entries(request.args[0] as object)) {
      assert.notEqual(value, undefined, `${request.method}: ${key} is undefined`);
    }
  }
  assert.deepEqual(
    connection.requests.map((r) => [r.method, r.args[0]]),
    [
      ['terminal/list', {}],
      ['environment/details', {}],
      ['terminal/acquire', { cwd: '/tmp', taskId: 't1' }],
      ['terminal/replay', { terminalId: 3 }],
      ['terminal/run', { command: 'make', cwd: '/repo', taskId: 't1' }],
    ],
  );
});

test('every request method sends the params of docs/protocol.md', async () => {
  const connection = new FakeConnection();
  const client = new TerminalRegistryClient(connection);
  connection.responders.set('terminal/output', () => ({ output: 'o' }));
  connection.responders.set('terminal/replay', () => ({ data: 'd' }));
  await client.write(1, 'yes\r');
  await client.resize(1, 100, 30);
  await client.kill(1);
  await client.close(1);
  await client.get(1);
  assert.equal(await client.output(1), 'o');
  assert.equal(await client.replay(1, 200), 'd');
  await client.release('t1');
  await client.list({ taskId: 't1', busy: true });
  await client.environmentDetails('t1', 1000);
  await client.acquire('/x', null, 'subprocess');
  await client.run('ls', { terminalId: 2, background: true, env: { A: '1' }, workDoneToken: 'w' });
  await client.run('npm init', { cwd: '/x', yieldOnInput: true });
  await client.wait({ runId: 7, timeoutMs: undefined });
  await client.wait({ terminalId: 2, timeoutMs: 500, yieldOnInput: false });
  await client.sendKeys(2, ['Escape', ':q!', 'Enter']);
  assert.deepEqual(
    connection.requests.map((r) => [r.method, r.args[0]]),
    [
      ['terminal/write', { terminalId: 1, data: 'yes\r' }],
      ['terminal/resize', { terminalId: 1, cols: 100, rows: 30 }],
      ['terminal/kill', { terminalId: 1 }],
      ['terminal/close', { terminalId: 1 }],
      ['terminal/get', { terminalId: 1 }],
      ['terminal/output', { terminalId: 1 }],
      ['terminal/replay', { terminalId: 1, maxBytes: 200 }],
      ['terminal/release', { taskId: 't1' }],
      ['terminal/list', { taskId: 't1', busy: true }],
      ['environment/details', { taskId: 't1', cooldownTimeoutMs: 1000 }],
      ['terminal/acquire', { cwd: '/x', taskId: null, provider: 'subprocess' }],
      ['terminal/run', { command: 'ls', terminalId: 2, background: true, env: { A: '1' }, workDoneToken: 'w' }],
      ['terminal/run', { command: 'npm init', cwd: '/x', yieldOnInput: true }],
      ['terminal/wait', { runId: 7 }],
      ['terminal/wait', { terminalId: 2, timeoutMs: 500, yieldOnInput: false }],
      ['terminal/sendKeys', { terminalId: 2, keys: ['Escape', ':q!', 'Enter'] }],
    ],
  );
});

test('a cancellation token is passed as a separate last argument', async () => {
  const connection = new FakeConnection();
  const client = new TerminalRegistryClient(connection);
  const token = { isCancellationRequested: false, onCancellationRequested: () => ({ dispose() {} }) };
  await client.run('sleep 1', { cwd: '/' }, token);
  assert.equal(connection.requests[0].args.length, 2);
  assert.equal(connection.requests[0].args[1], token);
});

test('each error code becomes its class; other errors pass through', async () => {
  const cases: [number, new (...args: never[]) => RegistryError][] = [
    [ErrorCode.ParseError, ParseError],
    [ErrorCode.InvalidRequest, InvalidRequestError],
    [ErrorCode.MethodNotFound, MethodNotFoundError],
    [ErrorCode.InvalidParams, InvalidParamsError],
    [ErrorCode.InternalError, InternalError],
    [ErrorCode.RequestCancelled, RequestCancelledError],
    [ErrorCode.UnknownTerminal, UnknownTerminalError],
    [ErrorCode.TerminalBusy, TerminalBusyError],
    [ErrorCode.SpawnFailed, SpawnFailedError],
  ];
  const connection = new FakeConnection();
  const client = new TerminalRegistryClient(connection);
  for (const [code, cls] of cases) {
    connection.responders.set('terminal/get', () => {
      throw responseError(code, `boom ${code}`);
    });
    await assert.rejects(client.get(1), (error: unknown) => {
      assert.ok(error instanceof cls, `${code} -> ${cls.name}`);
      assert.ok(error instanceof RegistryError);
      assert.equal((error as RegistryError).code, code);
      assert.equal((error as RegistryError).message, `boom ${code}`);
      assert.equal((error as RegistryError).name, cls.name);
      return true;
    });
  }
  const other = toRegistryError(responseError(-32099, 'odd'));
  assert.ok(other instanceof RegistryError);
  assert.equal(other.constructor, RegistryError);
  const plain = new Error('connection closed');
  assert.equal(toRegistryError(plain), plain);
  const system = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
  assert.equal(toRegistryError(system), system);
});

test('notifications fan out to every listener; one handler per method on the connection', () => {
  const connection = new FakeConnection();
  const client = new TerminalRegistryClient(connection);
  assert.deepEqual(
    [...connection.handlers.keys()].sort(),
    [
      'terminal/didChange',
      'terminal/didClose',
      'terminal/didEndRun',
      'terminal/didOpen',
      'terminal/didStartRun',
      'terminal/didWrite',
    ],
  );
  const a: unknown[] = [];
  const b: unknown[] = [];
  const subA = client.onDidWrite((p) => a.push(p.data));
  client.on('terminal/didWrite', (p) => b.push(p.data));
  const ends: number[] = [];
  client.onDidEndRun((p) => ends.push(p.runId));
  connection.notify('terminal/didWrite', { terminalId: 1, data: 'x' });
  subA.dispose();
  connection.notify('terminal/didWrite', { terminalId: 1, data: 'y' });
  connection.notify('terminal/didEndRun', { terminalId: 1, runId: 7, state: 'completed', exitCode: 0 });
  assert.deepEqual(a, ['x']);
  assert.deepEqual(b, ['x', 'y']);
  assert.deepEqual(ends, [7]);
});

test('a throwing listener does not stop the others', () => {
  const connection = new FakeConnection();
  const client = new TerminalRegistryClient(connection);
  const heard: number[] = [];
  const original = console.error;
  console.error = () => undefined;
  try {
    client.onDidClose(() => {
      throw new Error('bad listener');
    });
    client.onDidClose((p) => heard.push(p.terminalId));
    connection.notify('terminal/didClose', { terminalId: 4 });
  } finally {
    console.error = original;
  }
  assert.deepEqual(heard, [4]);
});

test('replaceConnection keeps listeners and moves requests to the new connection', async () => {
  const first = new FakeConnection();
  const second = new FakeConnection();
  const client = new TerminalRegistryClient(first);
  const opened: number[] = [];
  client.onDidOpen((t) => opened.push(t.id));
  client.replaceConnection(second);
  assert.equal(first.handlers.size, 0, 'the old connection is no longer listened to');
  first.notify('terminal/didOpen', { id: 1 });
  second.notify('terminal/didOpen', { id: 2 });
  assert.deepEqual(opened, [2]);
  await client.kill(5);
  assert.equal(first.requests.length, 0);
  assert.equal(second.requests.length, 1);
  client.dispose();
  assert.equal(second.handlers.size, 0);
});
