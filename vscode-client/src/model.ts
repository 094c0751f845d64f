/**
 * The extension's picture of the registry: every terminal, kept current by
 * `terminal/didOpen`, `terminal/didChange` and `terminal/didClose` on top of an
 * initial `terminal/list`, grouped by task for the tree view. No `vscode` import.
 */

import type { TerminalRegistryClient } from './client';
import { Disposable, Emitter, Event, combineDisposables } from './events';
import type { Terminal, WaitingFor } from './protocol';

/** What a terminal is doing, as the tree shows it. */
export type TerminalState = 'waiting' | 'password' | 'fullScreen' | 'stopped' | 'busy' | 'hot' | 'idle';

/**
 * Codicon ids per state: a spinner while a command runs, a flame while output is fresh,
 * and one icon of its own for each way a command waits for someone.
 */
export const STATE_ICONS: Readonly<Record<TerminalState, string>> = {
  waiting: 'question',
  password: 'key',
  fullScreen: 'screen-full',
  stopped: 'debug-pause',
  busy: 'sync~spin',
  hot: 'flame',
  idle: 'terminal',
};

const WAITING_STATES: Readonly<Record<string, TerminalState>> = {
  waitingForInput: 'waiting',
  waitingForPassword: 'password',
  fullScreen: 'fullScreen',
  stoppedJob: 'stopped',
};

/** Waiting for someone wins over busy, busy over hot: what needs a person shows first. */
export function terminalState(terminal: Terminal): TerminalState {
  const waiting = terminal.state !== undefined ? WAITING_STATES[terminal.state] : undefined;
  if (waiting !== undefined) return waiting;
  if (terminal.busy) return 'busy';
  if (terminal.hot) return 'hot';
  return 'idle';
}

/** A command waits for someone: the tree's item and the kill menu treat it as busy. */
export function isWaiting(state: TerminalState): boolean {
  return state === 'waiting' || state === 'password' || state === 'fullScreen';
}

/** What a terminal waits for, in words: `waiting for input: continue?`, `less is open full screen: press q`. */
export function describeWaiting(waiting: WaitingFor): string {
  const program = waiting.program ?? 'the program';
  const prompt = waiting.prompt?.trim();
  let text: string;
  if (waiting.kind === 'fullScreen') {
    text = `${program} is open full screen` + (waiting.keys?.length ? `: press ${waiting.keys.join(' ')}` : '');
  } else if (waiting.kind === 'stoppedJob') {
    text = `a job is stopped (${program})`;
  } else {
    const what = waiting.kind === 'password' ? 'a password' : 'input';
    text = prompt ? `waiting for ${what}: ${prompt}` : `waiting for ${what} (${program})`;
  }
  return waiting.certainty === 'possibly' ? `possibly ${text}` : text;
}

export const BACKGROUND_LABEL = 'Background';

export interface TaskGroup {
  /** Stable key: `task:<id>`, or `background` for terminals without a task. */
  key: string;
  taskId: string | null;
  label: string;
  terminals: Terminal[];
}

/** Groups by task, tasks sorted by name and Background last; terminals by id. */
export function groupByTask(terminals: Iterable<Terminal>): TaskGroup[] {
  const byTask = new Map<string | null, Terminal[]>();
  for (const terminal of terminals) {
    const list = byTask.get(terminal.taskId) ?? [];
    list.push(terminal);
    byTask.set(terminal.taskId, list);
  }
  const tasks = [...byTask.keys()].filter((t): t is string => t !== null).sort((a, b) => a.localeCompare(b));
  const order: (string | null)[] = byTask.has(null) ? [...tasks, null] : tasks;
  return order.map((taskId) => ({
    key: taskId === null ? 'background' : `task:${taskId}`,
    taskId,
    label: taskId ?? BACKGROUND_LABEL,
    terminals: (byTask.get(taskId) ?? []).sort((a, b) => a.id - b.id),
  }));
}

/** `/home/me/src` -> `~/src` when `home` is given. */
export function shortenPath(path: string, home?: string): string {
  if (home && home !== '/' && (path === home || path.startsWith(home + '/'))) {
    return '~' + path.slice(home.length);
  }
  return path;
}

export interface TerminalText {
  label: string;
  description: string;
  tooltip: string;
}

const STATE_WORDS: Readonly<Record<TerminalState, string>> = {
  waiting: 'waiting for input',
  password: 'waiting for a password',
  fullScreen: 'a full-screen program waits for keys',
  stopped: 'a job is stopped',
  busy: 'running a command',
  hot: 'idle, output in the last seconds',
  idle: 'idle',
};

/** The texts of a terminal's tree item. */
export function describeTerminal(terminal: Terminal, home?: string): TerminalText {
  const state = terminalState(terminal);
  const cwd = shortenPath(terminal.cwd, home);
  const shellName = terminal.shell.split('/').pop() || terminal.shell;
  const what = terminal.provider === 'shell' ? shellName : 'subprocess';
  const waiting = terminal.waitingFor ? describeWaiting(terminal.waitingFor) : undefined;
  // A waiting terminal shows its question where the command line would be.
  const detail = waiting ?? terminal.lastCommand;
  const description = detail ? `${cwd} · ${detail}` : cwd;
  const tooltip = [
    `Terminal ${terminal.id} (${terminal.provider}${terminal.provider === 'shell' ? `, ${terminal.shell}` : ''}` +
      `${terminal.pid !== null ? `, pid ${terminal.pid}` : ''})`,
    `Task: ${terminal.taskId ?? `none (${BACKGROUND_LABEL.toLowerCase()})`}`,
    `State: ${waiting ?? STATE_WORDS[state]}`,
    `Working directory: ${terminal.cwd}`,
    `Shell integration: ${terminal.shellIntegration}`,
    `Last command: ${terminal.lastCommand ?? '(none)'}`,
  ].join('\n');
  return { label: `${terminal.id}: ${what}`, description, tooltip };
}

/** The store. `onDidChange` fires after every change (coalescing is the view's business). */
export class TerminalModel implements Disposable {
  private readonly terminals = new Map<number, Terminal>();
  private readonly changed = new Emitter<void>();
  /** Bumped by reset/reload so a stale `terminal/list` answer is ignored. */
  private generation = 0;

  readonly onDidChange: Event<void> = this.changed.event;

  /** Keep the model current from the client's notifications. */
  attach(client: TerminalRegistryClient): Disposable {
    return combineDisposables(
      client.onDidOpen((terminal) => this.upsert(terminal)),
      client.onDidChange((terminal) => this.upsert(terminal)),
      client.onDidClose(({ terminalId }) => this.remove(terminalId)),
    );
  }

  /**
   * Replace everything with `terminal/list` (at start and after a server restart).
   * The answer is the newest truth: notifications sent before it are already in it,
   * later ones apply on top as they arrive. Returns false if a reset overtook it.
   */
  async reload(client: TerminalRegistryClient): Promise<boolean> {
    const generation = ++this.generation;
    const terminals = await client.list();
    if (generation !== this.generation) return false;
    this.terminals.clear();
    for (const terminal of terminals) this.terminals.set(terminal.id, terminal);
    this.changed.fire();
    return true;
  }

  /** Forget everything (the server stopped: its terminals are gone). */
  reset(): void {
    this.generation++;
    if (this.terminals.size === 0) return;
    this.terminals.clear();
    this.changed.fire();
  }

  upsert(terminal: Terminal): void {
    this.terminals.set(terminal.id, terminal);
    this.changed.fire();
  }

  remove(terminalId: number): void {
    if (this.terminals.delete(terminalId)) this.changed.fire();
  }

  get(terminalId: number): Terminal | undefined {
    return this.terminals.get(terminalId);
  }

  all(): Terminal[] {
    return [...this.terminals.values()].sort((a, b) => a.id - b.id);
  }

  groups(): TaskGroup[] {
    return groupByTask(this.terminals.values());
  }

  get size(): number {
    return this.terminals.size;
  }

  dispose(): void {
    this.changed.dispose();
    this.terminals.clear();
  }
}
