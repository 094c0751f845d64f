/**
 * The few parts of the `vscode` module that src/tree.ts uses, and a hook that makes
 * `require('vscode')` return them (the real module exists only inside VS Code).
 */

import Module from 'node:module';

export enum TreeItemCollapsibleState {
  None = 0,
  Collapsed = 1,
  Expanded = 2,
}

export class ThemeIcon {
  constructor(readonly id: string) {}
}

export class TreeItem {
  id?: string;
  description?: string;
  tooltip?: string;
  contextValue?: string;
  iconPath?: ThemeIcon;
  command?: { command: string; title: string; arguments?: unknown[] };

  constructor(
    readonly label: string,
    readonly collapsibleState: TreeItemCollapsibleState = TreeItemCollapsibleState.None,
  ) {}
}

export class EventEmitter<T> {
  private listeners = new Set<(value: T) => void>();
  readonly event = (listener: (value: T) => void) => {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  };
  fire(value: T): void {
    for (const listener of [...this.listeners]) listener(value);
  }
  dispose(): void {
    this.listeners.clear();
  }
}

export const fakeVscode = { TreeItem, TreeItemCollapsibleState, ThemeIcon, EventEmitter };

const FAKE_ID = '/fake/node_modules/vscode/index.js';

/** From now on, `require('vscode')` anywhere gives {@link fakeVscode}. */
export function installFakeVscode(): void {
  // Node's resolver is not in its public types; this is the documented-by-practice hook.
  const moduleInternals = Module as unknown as {
    _resolveFilename(request: string, ...rest: unknown[]): string;
  };
  const original = moduleInternals._resolveFilename;
  if ((original as { fakeVscode?: boolean }).fakeVscode) return;
  const resolve = function (this: unknown, request: string, ...rest: unknown[]): string {
    return request === 'vscode' ? FAKE_ID : original.call(this, request, ...rest);
  };
  Object.assign(resolve, { fakeVscode: true });
  moduleInternals._resolveFilename = resolve;
  const fake = new Module(FAKE_ID);
  fake.filename = FAKE_ID;
  fake.loaded = true;
  fake.exports = fakeVscode;
  require.cache[FAKE_ID] = fake;
}
