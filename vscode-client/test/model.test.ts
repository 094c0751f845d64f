/** src/model.ts: states, icons, grouping, texts, and the store (no vscode needed). */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TerminalRegistryClient } from '../src/client';
import {
  BACKGROUND_LABEL,
  STATE_ICONS,
  TerminalModel,
  describeTerminal,
  describeWaiting,
  groupByTask,
  isWaiting,
  shortenPath,
  terminalState,
} from '../src/model';
import type { Terminal } from '../src/protocol';
import { deferred, FakeConnection } from './helpers/fakeConnection';
import { makeTerminal } from './helpers/terminals';

test('state: busy wins over hot; each state has its icon', () => {
  assert.equal(terminalState(makeTerminal({ id: 1, busy: true, hot: true })), 'busy');
  assert.equal(terminalState(makeTerminal({ id: 1, hot: true })), 'hot');
  assert.equal(terminalState(makeTerminal({ id: 1 })), 'idle');
  assert.deepEqual(STATE_ICONS, {
    waiting: 'question',
    password: 'key',
    fullScreen: 'screen-full',
    stopped: 'debug-pause',
    busy: 'sync~spin',
    hot: 'flame',
    idle: 'terminal',
  });
  // An older server sends no state: busy, hot and idle as before.
  assert.equal(terminalState(makeTerminal({ id: 1, busy: true, state: undefined })), 'busy');
});

test('waiting: each way to wait has its state, and the texts carry the question', () => {
  const asked = makeTerminal({
    id: 4,
    busy: true,
    hot: true,
    cwd: '/home/me/src',
    lastCommand: 'npm init',
    state: 'waitingForInput',
    waitingFor: { kind: 'input', prompt: 'package name: (src) ', program: 'node', certainty: 'certain' },
  });
  assert.equal(terminalState(asked), 'waiting');
  const text = describeTerminal(asked, '/home/me');
  assert.equal(text.description, '~/src · waiting for input: package name: (src)');
  assert.match(text.tooltip, /^State: waiting for input: package name: \(src\)$/m);
  assert.match(text.tooltip, /^Last command: npm init$/m);

  const cases: [Partial<Terminal>, string, string][] = [
    [
      { state: 'waitingForPassword', waitingFor: { kind: 'password', prompt: 'Password: ', program: 'sudo', certainty: 'possibly' } },
      'password',
      'possibly waiting for a password: Password:',
    ],
    [
      { state: 'fullScreen', waitingFor: { kind: 'fullScreen', prompt: null, program: 'less', certainty: 'certain', keys: ['q'] } },
      'fullScreen',
      'less is open full screen: press q',
    ],
    [
      { state: 'waitingForInput', waitingFor: { kind: 'input', prompt: '', program: 'cat', certainty: 'certain' } },
      'waiting',
      'waiting for input (cat)',
    ],
    [
      { state: 'stoppedJob', busy: false, waitingFor: { kind: 'stoppedJob', prompt: null, program: 'cat', certainty: 'certain' } },
      'stopped',
      'a job is stopped (cat)',
    ],
  ];
  for (const [fields, state, words] of cases) {
    const terminal = makeTerminal({ id: 5, busy: true, ...fields });
    assert.equal(terminalState(terminal), state);
    assert.equal(describeWaiting(terminal.waitingFor!), words);
    assert.equal(describeTerminal(terminal).description, `/repo · ${words}`);
  }
  assert.equal(isWaiting('waiting') && isWaiting('password') && isWaiting('fullScreen'), true);
  assert.equal(isWaiting('stopped') || isWaiting('busy'), false);
});

test('groups: by task, sorted, Background (null task) last, terminals by id', () => {
  const groups = groupByTask([
    makeTerminal({ id: 5, taskId: null }),
    makeTerminal({ id: 3, taskId: 'beta' }),
    makeTerminal({ id: 2, taskId: 'alpha' }),
    makeTerminal({ id: 1, taskId: 'beta' }),
    makeTerminal({ id: 4, taskId: null }),
  ]);
  assert.deepEqual(
    groups.map((g) => [g.key, g.label, g.taskId, g.terminals.map((t) => t.id)]),
    [
      ['task:alpha', 'alpha', 'alpha', [2]],
      ['task:beta', 'beta', 'beta', [1, 3]],
      ['background', BACKGROUND_LABEL, null, [4, 5]],
    ],
  );
  assert.deepEqual(groupByTask([]), []);
  assert.deepEqual(
    groupByTask([makeTerminal({ id: 1, taskId: 'only' })]).map((g) => g.key),
    ['task:only'],
  );
});

test('texts: label, description with the live cwd and last command, full tooltip', () => {
  const busy = makeTerminal({ id: 7, busy: true, cwd: '/home/me/src', lastCommand: 'make -j4', taskId: 'build' });
  const text = describeTerminal(busy, '/home/me');
  assert.equal(text.label, '7: bash');
  assert.equal(text.description, '~/src · make -j4');
  assert.match(text.tooltip, /^Terminal 7 \(shell, \/bin\/bash, pid 1007\)$/m);
  assert.match(text.tooltip, /^Task: build$/m);
  assert.match(text.tooltip, /^State: running a command$/m);
  assert.match(text.tooltip, /^Working directory: \/home\/me\/src$/m);
  assert.match(text.tooltip, /^Shell integration: rich$/m);
  assert.match(text.tooltip, /^Last command: make -j4$/m);

  const sub = describeTerminal(makeTerminal({ id: 2, provider: 'subprocess', pid: null, taskId: null }));
  assert.equal(sub.label, '2: subprocess');
  assert.equal(sub.description, '/repo');
  assert.match(sub.tooltip, /^Terminal 2 \(subprocess\)$/m);
  assert.match(sub.tooltip, /^Task: none \(background\)$/m);
  assert.match(sub.tooltip, /^Last command: \(none\)$/m);

  assert.equal(shortenPath('/home/me', '/home/me'), '~');
  assert.equal(shortenPath('/home/mel/x', '/home/me'), '/home/mel/x');
  assert.equal(shortenPath('/x', '/'), '/x');
});

test('store: initial list, then didOpen/didChange/didClose', async () => {
  const connection = new FakeConnection();
  const client = new TerminalRegistryClient(connection);
  connection.responders.set('terminal/list', () => [makeTerminal({ id: 1 }), makeTerminal({ id: 2, taskId: null })]);
  const model = new TerminalModel();
  model.attach(client);
  let changes = 0;
  model.onDidChange(() => changes++);

  assert.equal(await model.reload(client), true);
  assert.deepEqual(connection.requests.map((r) => [r.method, r.args[0]]), [['terminal/list', {}]]);
  assert.deepEqual(model.all().map((t) => t.id), [1, 2]);
  assert.equal(changes, 1);

  connection.notify('terminal/didOpen', makeTerminal({ id: 3, taskId: 't2' }));
  connection.notify('terminal/didChange', makeTerminal({ id: 1, busy: true, cwd: '/repo/src' }));
  assert.equal(model.get(1)?.busy, true);
  assert.equal(model.get(1)?.cwd, '/repo/src');
  assert.deepEqual(model.groups().map((g) => g.key), ['task:t1', 'task:t2', 'background']);

  connection.notify('terminal/didClose', { terminalId: 2 });
  assert.equal(model.get(2), undefined);
  assert.deepEqual(model.groups().map((g) => g.key), ['task:t1', 'task:t2']);
  connection.notify('terminal/didClose', { terminalId: 99 }); // unknown: no change event
  assert.equal(changes, 4);

  model.reset();
  assert.equal(model.size, 0);
  assert.equal(changes, 5);
});

test('store: a reset overtakes a pending list (a restarted server), whose answer is then ignored', async () => {
  const connection = new FakeConnection();
  const client = new TerminalRegistryClient(connection);
  const pending = deferred<unknown>();
  connection.responders.set('terminal/list', () => pending.promise);
  const model = new TerminalModel();
  model.attach(client);
  const reloading = model.reload(client);
  model.reset();
  pending.resolve([makeTerminal({ id: 1 })]);
  assert.equal(await reloading, false);
  assert.equal(model.size, 0);
});

test('store: a detached model stops following', () => {
  const connection = new FakeConnection();
  const client = new TerminalRegistryClient(connection);
  const model = new TerminalModel();
  const attached = model.attach(client);
  connection.notify('terminal/didOpen', makeTerminal({ id: 1 }));
  attached.dispose();
  connection.notify('terminal/didOpen', makeTerminal({ id: 2 }));
  assert.deepEqual(model.all().map((t) => t.id), [1]);
});
