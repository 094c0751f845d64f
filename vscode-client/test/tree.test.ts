/** src/tree.ts against a fake `vscode` module: groups, items, icons, context values. */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TerminalModel } from '../src/model';
import type { Terminal } from '../src/protocol';
import { ThemeIcon, TreeItem, TreeItemCollapsibleState, installFakeVscode } from './helpers/fakeVscode';
import { makeTerminal } from './helpers/terminals';

installFakeVscode();
// Required only now, so that its `require('vscode')` finds the fake.
const tree = require('../src/tree') as typeof import('../src/tree');

function setup(terminals: Terminal[]) {
  const model = new TerminalModel();
  for (const terminal of terminals) model.upsert(terminal);
  const provider = new tree.TerminalTreeProvider(model, '/home/me');
  return { model, provider };
}

test('root: one expanded group per task, Background last, with counts', () => {
  const { provider } = setup([
    makeTerminal({ id: 1, taskId: 'b-task', busy: true }),
    makeTerminal({ id: 2, taskId: null }),
    makeTerminal({ id: 3, taskId: 'a-task' }),
    makeTerminal({ id: 4, taskId: 'b-task' }),
  ]);
  const roots = provider.getChildren();
  assert.deepEqual(
    roots.map((n) => n.kind),
    ['task', 'task', 'task'],
  );
  const items = roots.map((n) => provider.getTreeItem(n) as unknown as TreeItem);
  assert.deepEqual(
    items.map((i) => [i.label, i.id, i.contextValue, i.description, i.collapsibleState]),
    [
      ['a-task', 'task:a-task', 'task', '1 terminal', TreeItemCollapsibleState.Expanded],
      ['b-task', 'task:b-task', 'task', '2 terminals, 1 busy', TreeItemCollapsibleState.Expanded],
      ['Background', 'background', 'task.background', '1 terminal', TreeItemCollapsibleState.Expanded],
    ],
  );
  assert.ok(items.every((i) => i.iconPath instanceof ThemeIcon));
  assert.deepEqual(
    provider.getChildren(roots[1]).map((n) => (n.kind === 'terminal' ? n.terminal.id : -1)),
    [1, 4],
  );
});

test('terminal items: icon and context value by state, texts, click opens the mirror', () => {
  const { provider } = setup([
    makeTerminal({ id: 1, busy: true, hot: true, lastCommand: 'make', cwd: '/home/me/p' }),
    makeTerminal({ id: 2, hot: true }),
    makeTerminal({ id: 3 }),
  ]);
  const [group] = provider.getChildren();
  const children = provider.getChildren(group);
  const items = children.map((n) => provider.getTreeItem(n) as unknown as TreeItem);
  assert.deepEqual(
    items.map((i) => [i.id, (i.iconPath as ThemeIcon).id, i.contextValue, i.collapsibleState]),
    [
      ['terminal:1', 'sync~spin', 'terminal.busy', TreeItemCollapsibleState.None],
      ['terminal:2', 'flame', 'terminal.hot', TreeItemCollapsibleState.None],
      ['terminal:3', 'terminal', 'terminal.idle', TreeItemCollapsibleState.None],
    ],
  );
  assert.equal(items[0].label, '1: bash');
  assert.equal(items[0].description, '~/p · make');
  assert.match(items[0].tooltip!, /Working directory: \/home\/me\/p/);
  assert.equal(items[0].command?.command, tree.SHOW_TERMINAL_COMMAND);
  assert.deepEqual(items[0].command?.arguments, [children[0]]);
  assert.deepEqual(provider.getChildren(children[0]), []);
  // Context values match the package.json menus: `viewItem =~ /^terminal/`, kill on busy only.
  for (const item of items) assert.match(item.contextValue!, /^terminal/);
  assert.equal(items.filter((i) => i.contextValue === 'terminal.busy').length, 1);
});

test('getParent finds the group of a terminal', () => {
  const { provider } = setup([makeTerminal({ id: 1, taskId: 'x' }), makeTerminal({ id: 2, taskId: null })]);
  const [, background] = provider.getChildren();
  const [terminal] = provider.getChildren(background);
  const parent = provider.getParent(terminal);
  assert.equal(parent?.kind, 'task');
  assert.equal(parent?.kind === 'task' ? parent.group.key : '', 'background');
  assert.equal(provider.getParent(background), undefined);
});

test('a model change refreshes the tree; dispose stops that', () => {
  const { model, provider } = setup([]);
  let refreshes = 0;
  provider.onDidChangeTreeData(() => refreshes++);
  assert.deepEqual(provider.getChildren(), []);
  model.upsert(makeTerminal({ id: 9 }));
  model.remove(9);
  assert.equal(refreshes, 2);
  provider.dispose();
  model.upsert(makeTerminal({ id: 10 }));
  assert.equal(refreshes, 2);
});

test('context value helpers', () => {
  assert.equal(tree.terminalContextValue(makeTerminal({ id: 1, busy: true })), 'terminal.busy');
  assert.equal(tree.terminalContextValue(makeTerminal({ id: 1 })), 'terminal.idle');
});

test('a waiting terminal: its own icon, the question in its description, kill still offered', () => {
  const { provider } = setup([
    makeTerminal({
      id: 1,
      busy: true,
      cwd: '/home/me/p',
      lastCommand: "read -p 'continue? ' x",
      state: 'waitingForInput',
      waitingFor: { kind: 'input', prompt: 'continue? ', program: 'bash', certainty: 'certain' },
    }),
    makeTerminal({
      id: 2,
      busy: true,
      state: 'fullScreen',
      waitingFor: { kind: 'fullScreen', prompt: null, program: 'vim', certainty: 'certain', keys: ['Escape', ':qa!', 'Enter'] },
    }),
    makeTerminal({ id: 3, busy: true, state: 'running' }),
  ]);
  const [group] = provider.getChildren();
  assert.equal((provider.getTreeItem(group) as unknown as TreeItem).description, '3 terminals, 3 busy, 2 waiting');
  const items = provider.getChildren(group).map((n) => provider.getTreeItem(n) as unknown as TreeItem);
  assert.deepEqual(
    items.map((i) => [(i.iconPath as ThemeIcon).id, i.contextValue, i.description]),
    [
      ['question', 'terminal.busy.waiting', '~/p · waiting for input: continue?'],
      ['screen-full', 'terminal.busy.fullScreen', '/repo · vim is open full screen: press Escape :qa! Enter'],
      ['sync~spin', 'terminal.busy', '/repo'],
    ],
  );
  // package.json offers kill where `viewItem =~ /^terminal\.busy/`: on all three.
  const manifest = require('../../package.json') as {
    contributes: { menus: { 'view/item/context': { command: string; when: string }[] } };
  };
  const kill = manifest.contributes.menus['view/item/context'].filter((m) => m.command === 'terminalRegistry.killCommand');
  for (const menu of kill) {
    const pattern = /viewItem =~ \/(.*)\/$/.exec(menu.when);
    assert.ok(pattern, menu.when);
    const matches = new RegExp(pattern[1]);
    assert.ok(items.every((i) => matches.test(i.contextValue!)));
    assert.ok(!matches.test('terminal.idle') && !matches.test('terminal.stopped'));
  }
});

test('caughtUp waits until VS Code has fetched the row as the model holds it now', async () => {
  const { model, provider } = setup([makeTerminal({ id: 1, taskId: 't', busy: true })]);
  const fetchRow = () => {
    const [group] = provider.getChildren();
    for (const node of provider.getChildren(group)) provider.getTreeItem(node);
  };
  fetchRow();
  await provider.caughtUp(1, 5000); // fetched since the last change: at once
  model.upsert(makeTerminal({ id: 1, taskId: 't', busy: false }));
  let settled = false;
  const waiting = provider.caughtUp(1, 5000).then(() => {
    settled = true;
  });
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(settled, false, 'the row VS Code holds still shows the run as busy');
  fetchRow();
  await waiting;
  assert.equal(settled, true);
  // A view that never asks (hidden, or VS Code slow) holds nobody past the bound.
  model.upsert(makeTerminal({ id: 1, taskId: 't', busy: true }));
  const started = Date.now();
  await provider.caughtUp(1, 30);
  assert.ok(Date.now() - started < 2000);
});

test('caughtUp, for a terminal in a collapsed group: the group row is what VS Code shows', async () => {
  const { model, provider } = setup([makeTerminal({ id: 1, taskId: 't', busy: true })]);
  const [group] = provider.getChildren();
  provider.getTreeItem(group);
  provider.expansionChanged(group, false);
  model.upsert(makeTerminal({ id: 1, taskId: 't', busy: false }));
  let settled = false;
  const waiting = provider.caughtUp(1, 5000).then(() => {
    settled = true;
  });
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(settled, false, 'the group row VS Code holds still counts the terminal busy');
  // VS Code fetches only the root's rows: the terminal's row is never asked for.
  for (const node of provider.getChildren()) provider.getTreeItem(node);
  await waiting;
  assert.equal(settled, true);
  // Expanded again: its terminal's row is what counts.
  provider.expansionChanged(provider.getChildren()[0], true);
  model.upsert(makeTerminal({ id: 1, taskId: 't', busy: true }));
  for (const node of provider.getChildren()) provider.getTreeItem(node);
  settled = false;
  const again = provider.caughtUp(1, 5000).then(() => {
    settled = true;
  });
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(settled, false, 'the group row alone does not show the terminal row');
  for (const node of provider.getChildren(provider.getChildren()[0])) provider.getTreeItem(node);
  await again;
});
