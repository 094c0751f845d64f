/**
 * The API the extension returns from `activate`, for other extensions (agents):
 *
 * ```ts
 * const ext = vscode.extensions.getExtension<TerminalRegistryApi>('terminal-registry.terminal-registry');
 * const api = await ext!.activate();
 * const result = await api.run('npm test', { taskId: 'task-1', cwd: '/repo' });
 * ```
 *
 * It is a function of a {@link TerminalRegistryClient}, so it is tested in plain node.
 * No `vscode` import: the types here are all a consumer needs.
 */

import type { CancellationTokenLike, TerminalRegistryClient } from './client';
import type { Disposable } from './events';
import type { DidEndRunParams, EnvironmentDetailsResult, Provider, RunResult, Terminal } from './protocol';

export type { CancellationTokenLike } from './client';
export type { Disposable } from './events';
export type { DidEndRunParams, EnvironmentDetailsResult, Provider, RunResult, RunState, Terminal } from './protocol';
export {
  InvalidParamsError,
  RegistryError,
  RequestCancelledError,
  SpawnFailedError,
  TerminalBusyError,
  UnknownTerminalError,
} from './client';

/** The version of this API; a breaking change gets a new number. */
export const API_VERSION = 1;

/** Options of {@link TerminalRegistryApi.run}. */
export interface ApiRunOptions {
  /** The task the command belongs to; its terminals are reused and reported together. */
  taskId: string;
  /** Where to run: an idle terminal of the task standing here is reused. Ignored with `terminalId`. */
  cwd: string;
  /** Interrupt the command (SIGINT, SIGTERM, SIGKILL) after this long; the result is `timedOut`. */
  timeoutMs?: number;
  /** Answer as soon as the command has started; its end comes through {@link TerminalRegistryApi.onDidEndRun}. */
  background?: boolean;
  /** Run in this terminal (from {@link TerminalRegistryApi.acquire}) as it stands, instead of acquiring one. */
  terminalId?: number;
  /** Variables for this command (shell provider: exported in the shell). */
  env?: Record<string, string>;
  /** `shell` (default: a real shell in a PTY) or `subprocess` (a child process per command). */
  provider?: Provider;
}

export interface TerminalRegistryApi {
  /** {@link API_VERSION}. */
  readonly version: number;

  /**
   * A terminal bound to the task, standing in `cwd`: the task's own idle terminal with
   * that live cwd, else an idle released one, else a new one.
   * @param provider `shell` (default) or `subprocess`.
   */
  acquire(cwd: string, taskId: string, provider?: Provider): Promise<Terminal>;

  /**
   * Run a command in a real terminal and get its exact output, exit code and the cwd
   * the shell stands in afterwards. Foreground runs answer when the command ends;
   * background runs answer with `state: "running"` once it started.
   * Cancelling `token` interrupts the command; the promise then rejects with
   * `RequestCancelledError`. Errors are `RegistryError` subclasses (`InvalidParamsError`
   * for a cwd that does not exist, `TerminalBusyError`, `UnknownTerminalError`, ...).
   */
  run(command: string, options: ApiRunOptions, token?: CancellationTokenLike): Promise<RunResult>;

  /**
   * The markdown report for a model of what the task's terminals (and released ones)
   * did since the last report: active terminals, finished background commands with
   * output not yet retrieved. Waits (at most `cooldownTimeoutMs`, default 5 s) for hot
   * output to settle. `markdown` is `""` when there is nothing to report.
   */
  environmentDetails(taskId: string, options?: { cooldownTimeoutMs?: number }): Promise<EnvironmentDetailsResult>;

  /** The task is done with its terminals: they become background terminals others may reuse. Nothing is killed. */
  release(taskId: string): Promise<void>;

  /** Every command's end, in any terminal (filter on `terminalId` or `runId`). */
  onDidEndRun(listener: (event: DidEndRunParams) => void): Disposable;
}

/** The API over a client (the extension passes its long-lived client). */
export function createApi(client: TerminalRegistryClient): TerminalRegistryApi {
  return Object.freeze({
    version: API_VERSION,
    acquire: (cwd: string, taskId: string, provider?: Provider) => client.acquire(cwd, taskId, provider),
    run: (command: string, options: ApiRunOptions, token?: CancellationTokenLike) =>
      client.run(
        command,
        {
          taskId: options.taskId,
          cwd: options.cwd,
          timeoutMs: options.timeoutMs,
          background: options.background,
          terminalId: options.terminalId,
          env: options.env,
          provider: options.provider,
        },
        token,
      ),
    environmentDetails: (taskId: string, options: { cooldownTimeoutMs?: number } = {}) =>
      client.environmentDetails(taskId, options.cooldownTimeoutMs),
    release: (taskId: string) => client.release(taskId),
    onDidEndRun: (listener: (event: DidEndRunParams) => void) => client.onDidEndRun(listener),
  });
}
