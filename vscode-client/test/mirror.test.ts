/** src/mirror.ts's ordering rules, with the replay answer held back at will. */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TerminalRegistryClient } from '../src/client';
import { REPAINT, TerminalMirror } from '../src/mirror';
import { deferred, FakeConnection, responseError } from './helpers/fakeConnection';

function setup() {
  const connection = new FakeConnection();
  const client = new TerminalRegistryClient(connection);
  const replay = deferred<{ data: string }>();
  connection.responders.set('terminal/replay', () => replay.promise);
  const screen: string[] = [];
  let closes = 0;
  const mirror = new TerminalMirror(client, 1, { onData: (t) => screen.push(t), onClose: () => closes++ });
  return { connection, client, replay, screen, mirror, closes: () => closes };
}

test('subscribes before asking for the replay; drops didWrite until the answer, then appends', async () => {
  const { connection, client, replay, screen, mirror } = setup();
  let writeListenersAtReplay = -1;
  connection.responders.set('terminal/replay', () => {
    // The replay is asked for only once the didWrite listener is in place.
    writeListenersAtReplay = client['emitters'].get('terminal/didWrite')!.listenerCount;
    return replay.promise;
  });
  const opening = mirror.open({ cols: 80, rows: 24 });
  assert.equal(mirror.state, 'opening');
  assert.equal(writeListenersAtReplay, 1);
  assert.deepEqual(
    connection.requests.map((r) => [r.method, r.args[0]]),
    [
      ['terminal/resize', { terminalId: 1, cols: 80, rows: 24 }],
      ['terminal/replay', { terminalId: 1, maxBytes: 256 * 1024 }],
    ],
  );
  connection.notify('terminal/didWrite', { terminalId: 1, data: 'already in the replay' });
  replay.resolve({ data: 'REPLAY' });
  await opening;
  assert.equal(mirror.state, 'live');
  connection.notify('terminal/didWrite', { terminalId: 1, data: 'new' });
  connection.notify('terminal/didWrite', { terminalId: 2, data: 'another terminal' });
  connection.notify('terminal/didWrite', { terminalId: 1, runId: 3, data: '!' });
  assert.deepEqual(screen, ['REPLAY', 'new', '!']);
});

test('input goes to terminal/write, sizes to terminal/resize; undeliverable input is said once', async () => {
  const { connection, replay, screen, mirror } = setup();
  const opening = mirror.open();
  replay.resolve({ data: '' });
  await opening;
  assert.deepEqual(screen, []);
  mirror.write('ls\r');
  mirror.resize(120, 40);
  mirror.resize(0, 0); // a hidden panel reports nothing useful: not sent
  assert.deepEqual(
    connection.requests.slice(1).map((r) => [r.method, r.args[0]]),
    [
      ['terminal/write', { terminalId: 1, data: 'ls\r' }],
      ['terminal/resize', { terminalId: 1, cols: 120, rows: 40 }],
    ],
  );
  connection.responders.set('terminal/write', () => {
    throw responseError(-32002, 'terminal 1 has no stdin');
  });
  mirror.write('a');
  mirror.write('b');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(screen.length, 1);
  assert.match(screen[0], /input not delivered: terminal 1 has no stdin/);
});

test('didClose ends the mirror with a notice and onClose; nothing is sent to close the terminal', async () => {
  const { connection, replay, screen, mirror, closes } = setup();
  const opening = mirror.open();
  replay.resolve({ data: 'x' });
  await opening;
  connection.notify('terminal/didClose', { terminalId: 2 });
  assert.equal(mirror.state, 'live');
  connection.notify('terminal/didClose', { terminalId: 1 });
  assert.equal(mirror.state, 'closed');
  assert.equal(closes(), 1);
  assert.match(screen.at(-1)!, /the registry terminal closed/);
  connection.notify('terminal/didWrite', { terminalId: 1, data: 'late' });
  mirror.write('ignored');
  assert.ok(!screen.includes('late'));
  assert.ok(!connection.requests.some((r) => r.method === 'terminal/close' || r.method === 'terminal/write'));
});

test('closed while opening: the late replay is not painted', async () => {
  const { connection, replay, screen, mirror, closes } = setup();
  const opening = mirror.open();
  connection.notify('terminal/didClose', { terminalId: 1 });
  replay.resolve({ data: 'stale' });
  await opening;
  assert.equal(mirror.state, 'closed');
  assert.equal(closes(), 1);
  assert.ok(!screen.includes('stale'));
});

test('dispose unsubscribes and leaves the registry terminal alone; detach says why', async () => {
  const { client, connection, replay, mirror, screen, closes } = setup();
  const opening = mirror.open();
  replay.resolve({ data: '' });
  await opening;
  mirror.dispose();
  assert.equal(mirror.state, 'closed');
  assert.equal(client['emitters'].get('terminal/didWrite')!.listenerCount, 0);
  assert.equal(client['emitters'].get('terminal/didClose')!.listenerCount, 0);
  assert.equal(closes(), 0, 'closing the view is not the registry closing');
  assert.deepEqual(connection.requests.map((r) => r.method), ['terminal/replay']);

  const other = new TerminalMirror(client, 5, { onData: (t) => screen.push(t), onClose: () => undefined });
  connection.responders.set('terminal/replay', () => ({ data: '' }));
  await other.open();
  other.detach('the server stopped');
  assert.equal(other.state, 'closed');
  assert.match(screen.at(-1)!, /the server stopped/);
});

test('a didWrite that says output was missed repaints from a fresh replay, nothing doubled', async () => {
  const { connection, replay, screen, mirror } = setup();
  const opening = mirror.open();
  replay.resolve({ data: 'FIRST' });
  await opening;
  const second = deferred<{ data: string }>();
  connection.responders.set('terminal/replay', () => second.promise);
  const replays = () => connection.requests.filter((r) => r.method === 'terminal/replay').length;
  connection.notify('terminal/didWrite', { terminalId: 1, data: 'a' });
  connection.notify('terminal/didWrite', { terminalId: 1, data: 'tail', missed: 5000 });
  assert.equal(mirror.state, 'opening');
  assert.equal(replays(), 2);
  connection.notify('terminal/didWrite', { terminalId: 1, data: 'inside the replay' });
  second.resolve({ data: 'FULL' });
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(mirror.state, 'live');
  connection.notify('terminal/didWrite', { terminalId: 1, data: 'after' });
  assert.deepEqual(screen, ['FIRST', 'a', `${REPAINT}FULL`, 'after']);
});
