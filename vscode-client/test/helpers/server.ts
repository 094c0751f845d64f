/**
 * Starts the real Python server over stdio with vscode-jsonrpc (as the extension's
 * LanguageClient would), initialises it, and shuts it down leaving no process behind.
 *
 * The command is `python3 -m protocol.cli` (run from the repository root, so `protocol`
 * imports even without an install) unless TERMINAL_REGISTRY_SERVER gives another, as a
 * JSON array or a space-separated line; `serve --stdio` is appended either way.
 */

import { ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  MessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  createMessageConnection,
} from 'vscode-jsonrpc/node';
import { TerminalRegistryClient } from '../../src/client';
import { NOTIFICATION_METHODS } from '../../src/protocol';
import type { NotificationMap, NotificationMethod, Settings } from '../../src/protocol';

/** The repository root: the nearest ancestor holding protocol/cli.py. */
export function repoRoot(): string {
  let dir = __dirname;
  for (;;) {
    if (fs.existsSync(path.join(dir, 'protocol', 'cli.py'))) return dir;
    const parent = path.dirname(dir);
    if (parent === dir) return path.resolve(__dirname, '..', '..', '..', '..');
    dir = parent;
  }
}

export function serverArgv(): string[] {
  const override = process.env.TERMINAL_REGISTRY_SERVER?.trim();
  let base: string[] = ['python3', '-m', 'protocol.cli'];
  if (override) {
    base = override.startsWith('[') ? (JSON.parse(override) as string[]) : override.split(/\s+/);
  }
  return [...base, 'serve', '--stdio'];
}

export const TEST_SETTINGS: Settings = { killGraceMs: 500, hotTimeoutMs: 300 };

export interface InitializeResult {
  capabilities: { experimental?: { terminalRegistry?: { version: number; providers: string[]; shells: string[] } } };
  serverInfo?: { name: string; version?: string };
}

export interface ServerHandle {
  child: ChildProcess;
  connection: MessageConnection;
  client: TerminalRegistryClient;
  initializeResult: InitializeResult;
  /** Everything the server wrote to stderr (its log). */
  stderr(): string;
  /** shutdown + exit, then wait for the process to end (killed if it does not in 15 s). */
  stop(): Promise<number | null>;
}

export async function startServer(settings: Settings = TEST_SETTINGS): Promise<ServerHandle> {
  const [command, ...args] = serverArgv();
  const child = spawn(command, args, { cwd: repoRoot(), stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const spawnFailed = new Promise<never>((_, reject) => child.once('error', reject));

  const connection = createMessageConnection(
    new StreamMessageReader(child.stdout!),
    new StreamMessageWriter(child.stdin!),
  );
  const client = new TerminalRegistryClient(connection);
  connection.listen();
  const initializeResult = (await Promise.race([
    connection.sendRequest('initialize', {
      processId: process.pid,
      capabilities: {},
      clientInfo: { name: 'terminal-registry-vscode-tests' },
      initializationOptions: settings,
    }),
    spawnFailed,
    exited.then((code) => {
      throw new Error(`the server exited (${code}) before answering initialize:\n${stderr}`);
    }),
  ])) as InitializeResult;
  await connection.sendNotification('initialized', {});

  let stopping: Promise<number | null> | undefined;
  const stop = (): Promise<number | null> => {
    stopping ??= (async () => {
      try {
        await withTimeout(connection.sendRequest('shutdown'), 15000, 'shutdown');
        await connection.sendNotification('exit');
      } catch {
        // The process will be killed below if it does not end by itself.
      }
      const timer = setTimeout(() => child.kill('SIGKILL'), 15000);
      const code = await exited;
      clearTimeout(timer);
      client.dispose();
      connection.dispose();
      return code;
    })();
    return stopping;
  };
  return { child, connection, client, initializeResult, stderr: () => stderr, stop };
}

/** Rejects after `ms`: a guard against hanging, never a substitute for an event. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Records every notification from the moment it is created, so a test can wait for
 * one that may already have arrived (no race between an action and its event).
 */
export class NotificationRecorder {
  readonly seen: { method: NotificationMethod; params: unknown }[] = [];
  private waiters: { method: NotificationMethod; match: (p: unknown) => boolean; resolve: (p: unknown) => void }[] = [];
  private readonly subscriptions: { dispose(): void }[];

  constructor(client: TerminalRegistryClient) {
    this.subscriptions = NOTIFICATION_METHODS.map((method) =>
      client.on(method, (params: unknown) => {
        this.seen.push({ method, params });
        this.waiters = this.waiters.filter((w) => {
          if (w.method !== method || !w.match(params)) return true;
          w.resolve(params);
          return false;
        });
      }),
    );
  }

  all<M extends NotificationMethod>(method: M, match: (p: NotificationMap[M]) => boolean = () => true): NotificationMap[M][] {
    return this.seen
      .filter((n) => n.method === method && match(n.params as NotificationMap[M]))
      .map((n) => n.params as NotificationMap[M]);
  }

  /** The first matching notification, past or future. */
  waitFor<M extends NotificationMethod>(
    method: M,
    match: (p: NotificationMap[M]) => boolean = () => true,
    timeoutMs = 20000,
  ): Promise<NotificationMap[M]> {
    const past = this.all(method, match)[0];
    if (past !== undefined) return Promise.resolve(past);
    const future = new Promise<NotificationMap[M]>((resolve) => {
      this.waiters.push({
        method,
        match: (p) => match(p as NotificationMap[M]),
        resolve: (p) => resolve(p as NotificationMap[M]),
      });
    });
    return withTimeout(future, timeoutMs, method);
  }

  /** All didWrite data of a terminal, concatenated. */
  written(terminalId: number): string {
    return this.all('terminal/didWrite', (p) => p.terminalId === terminalId)
      .map((p) => p.data)
      .join('');
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
  }
}
