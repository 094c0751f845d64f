/**
 * The "Terminal Registry" view: task groups (Background last) holding terminals whose
 * icon shows their state. Everything the view shows comes from src/model.ts; this
 * module only turns it into vscode.TreeItems.
 */

import * as vscode from 'vscode';
import { STATE_ICONS, TaskGroup, TerminalModel, describeTerminal, isWaiting, terminalState } from './model';
import type { Terminal } from './protocol';

export type RegistryNode =
  | { readonly kind: 'task'; readonly group: TaskGroup }
  | { readonly kind: 'terminal'; readonly terminal: Terminal };

/**
 * Context values the package.json menus test (`viewItem =~ /^terminal\.busy/` for kill,
 * `viewItem =~ /^terminal/`): a command that waits is busy too (`terminal.busy.waiting`).
 */
export function terminalContextValue(terminal: Terminal): string {
  const state = terminalState(terminal);
  return isWaiting(state) ? `terminal.busy.${state}` : `terminal.${state}`;
}

export function taskContextValue(group: TaskGroup): string {
  return group.taskId === null ? 'task.background' : 'task';
}

export const SHOW_TERMINAL_COMMAND = 'terminalRegistry.showTerminal';

export class TerminalTreeProvider implements vscode.TreeDataProvider<RegistryNode>, vscode.Disposable {
  private readonly changeEmitter = new vscode.EventEmitter<RegistryNode | undefined | void>();
  readonly onDidChangeTreeData: vscode.Event<RegistryNode | undefined | void> = this.changeEmitter.event;
  private readonly subscription: { dispose(): void };
  /** Refreshes asked of VS Code so far, and for each row (a terminal's id, a group's
   * key) the count when VS Code last fetched it. */
  private refreshes = 0;
  private readonly fetched = new Map<number | string, number>();
  /** Groups the person collapsed: their terminals' rows are not fetched, not shown. */
  private readonly collapsed = new Set<string>();
  private readonly fetchedEmitter = new vscode.EventEmitter<void>();

  /** @param home the home directory, shown as `~` in descriptions. */
  constructor(
    private readonly model: TerminalModel,
    private readonly home?: string,
  ) {
    // Whole-tree refresh: groups appear and vanish with their terminals, and VS Code
    // keeps expansion state by item id, so nothing is lost by not diffing.
    this.subscription = model.onDidChange(() => {
      this.refreshes++;
      this.changeEmitter.fire();
    });
  }

  /**
   * Resolves once VS Code has fetched the terminal's row as the model holds it now,
   * or after `timeoutMs`. VS Code coalesces a view's refreshes (one at once, the
   * rest 200 ms after the last), so a row can show a state for up to 200 ms after
   * the model left it: a run's result shown before its row caught up is read next
   * to a spinner that says the command still runs.
   */
  caughtUp(terminalId: number, timeoutMs: number): Promise<void> {
    const done = () => {
      const terminal = this.model.get(terminalId);
      const parent = terminal && this.getParent({ kind: 'terminal', terminal });
      if (parent?.kind !== 'task') return true;
      // In a collapsed group, its row (which counts busy terminals) is what shows.
      const row = this.collapsed.has(parent.group.key) ? parent.group.key : terminalId;
      return (this.fetched.get(row) ?? -1) >= this.refreshes;
    };
    if (timeoutMs <= 0 || done()) return Promise.resolve();
    return new Promise((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        listener.dispose();
        resolve();
      };
      const timer = setTimeout(finish, timeoutMs);
      const listener = this.fetchedEmitter.event(() => {
        if (done()) finish();
      });
    });
  }

  /** From the view's onDidCollapseElement / onDidExpandElement. */
  expansionChanged(element: RegistryNode, expanded: boolean): void {
    if (element.kind !== 'task') return;
    if (expanded) this.collapsed.delete(element.group.key);
    else this.collapsed.add(element.group.key);
  }

  getChildren(element?: RegistryNode): RegistryNode[] {
    if (element === undefined) return this.model.groups().map((group) => ({ kind: 'task', group }));
    if (element.kind === 'task') {
      return element.group.terminals.map((terminal) => ({ kind: 'terminal', terminal }));
    }
    return [];
  }

  getParent(element: RegistryNode): RegistryNode | undefined {
    if (element.kind === 'task') return undefined;
    const group = this.model.groups().find((g) => g.terminals.some((t) => t.id === element.terminal.id));
    return group ? { kind: 'task', group } : undefined;
  }

  getTreeItem(element: RegistryNode): vscode.TreeItem {
    return element.kind === 'task' ? this.taskItem(element.group) : this.terminalItem(element.terminal);
  }

  private taskItem(group: TaskGroup): vscode.TreeItem {
    this.noteFetched(group.key);
    const item = new vscode.TreeItem(group.label, vscode.TreeItemCollapsibleState.Expanded);
    item.id = group.key;
    item.contextValue = taskContextValue(group);
    const busy = group.terminals.filter((t) => t.busy).length;
    const waiting = group.terminals.filter((t) => isWaiting(terminalState(t))).length;
    const count = `${group.terminals.length} terminal${group.terminals.length === 1 ? '' : 's'}`;
    item.description = [count, busy > 0 ? `${busy} busy` : '', waiting > 0 ? `${waiting} waiting` : '']
      .filter(Boolean)
      .join(', ');
    item.iconPath = new vscode.ThemeIcon(group.taskId === null ? 'archive' : 'checklist');
    item.tooltip =
      group.taskId === null ? 'Terminals without a task: released ones, reusable by any task' : `Task ${group.taskId}`;
    return item;
  }

  private noteFetched(row: number | string): void {
    this.fetched.set(row, this.refreshes);
    // Told once this turn is over: VS Code sends the items it is gathering when the
    // turn that asked for them ends, and what waits on this should come after them.
    setTimeout(() => this.fetchedEmitter.fire(), 0);
  }

  private terminalItem(terminal: Terminal): vscode.TreeItem {
    this.noteFetched(terminal.id);
    const text = describeTerminal(terminal, this.home);
    const item = new vscode.TreeItem(text.label, vscode.TreeItemCollapsibleState.None);
    item.id = `terminal:${terminal.id}`;
    item.description = text.description;
    item.tooltip = text.tooltip;
    item.contextValue = terminalContextValue(terminal);
    item.iconPath = new vscode.ThemeIcon(STATE_ICONS[terminalState(terminal)]);
    // A click opens (or focuses) the mirror: the most common thing to want.
    item.command = { command: SHOW_TERMINAL_COMMAND, title: 'Show Terminal', arguments: [{ kind: 'terminal', terminal }] };
    return item;
  }

  dispose(): void {
    this.subscription.dispose();
    this.changeEmitter.dispose();
    this.fetchedEmitter.dispose();
  }
}
