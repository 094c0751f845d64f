/**
 * TerminalRegistryClient: typed requests and notifications of terminal-registry's
 * protocol over any JSON-RPC connection.
 *
 * The connection is a minimal structural interface that both vscode-languageclient's
 * `LanguageClient` and a vscode-jsonrpc `MessageConnection` satisfy, so this module
 * never imports `vscode` and is tested in plain node against the real server.
 */

import { Disposable, Emitter, Event } from './events';
import {
  DidCloseParams,
  DidEndRunParams,
  DidStartRunParams,
  DidWriteParams,
  EnvironmentDetailsParams,
  EnvironmentDetailsResult,
  ErrorCode,
  NOTIFICATION_METHODS,
  NotificationMap,
  NotificationMethod,
  Provider,
  RequestMap,
  RequestMethod,
  RunParams,
  RunResult,
  Terminal,
  WaitParams,
} from './protocol';

/** What vscode-jsonrpc and VS Code accept as a cancellation token. */
export interface CancellationTokenLike {
  readonly isCancellationRequested: boolean;
  onCancellationRequested(listener: (e: any) => any): Disposable;
}

/**
 * The part of a JSON-RPC connection the client needs. Methods (not function-valued
 * properties) on purpose: their parameters are checked bivariantly, which lets the
 * overloaded signatures of LanguageClient and MessageConnection fit.
 */
export interface RpcConnection {
  sendRequest(method: string, params: object, token: CancellationTokenLike): Promise<unknown>;
  sendRequest(method: string, params: object): Promise<unknown>;
  sendNotification?(method: string, params?: object): unknown;
  onNotification(method: string, handler: (params: any) => void): Disposable;
}

// -- errors ------------------------------------------------------------------------------

/** An error answer from the server; `code` is the JSON-RPC error code. */
export class RegistryError extends Error {
  constructor(
    message: string,
    readonly code: number,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** -32700: bytes that were not a framed JSON message. */
export class ParseError extends RegistryError {}
/** -32600: not a JSON-RPC request, or a request after `shutdown`. */
export class InvalidRequestError extends RegistryError {}
/** -32601: the server has no such method (an older server?). */
export class MethodNotFoundError extends RegistryError {}
/** -32602: invalid params; the message names the field (`cwd '/nope' does not exist`). */
export class InvalidParamsError extends RegistryError {}
/** -32603: a bug in the server. */
export class InternalError extends RegistryError {}
/** -32800: the request was cancelled (the command was interrupted). */
export class RequestCancelledError extends RegistryError {}
/** -32001: no terminal with that id. */
export class UnknownTerminalError extends RegistryError {}
/** -32002: the terminal is running a command, is closed, or has no stdin. */
export class TerminalBusyError extends RegistryError {}
/** -32003: a shell or process could not be started; the message carries the OS error. */
export class SpawnFailedError extends RegistryError {}

type ErrorClass = new (message: string, code: number, data?: unknown) => RegistryError;

const ERROR_CLASSES = new Map<number, ErrorClass>([
  [ErrorCode.ParseError, ParseError],
  [ErrorCode.InvalidRequest, InvalidRequestError],
  [ErrorCode.MethodNotFound, MethodNotFoundError],
  [ErrorCode.InvalidParams, InvalidParamsError],
  [ErrorCode.InternalError, InternalError],
  [ErrorCode.RequestCancelled, RequestCancelledError],
  [ErrorCode.UnknownTerminal, UnknownTerminalError],
  [ErrorCode.TerminalBusy, TerminalBusyError],
  [ErrorCode.SpawnFailed, SpawnFailedError],
]);

/**
 * The RegistryError for a rejected request: a JSON-RPC error answer (vscode-jsonrpc's
 * ResponseError: an Error with a numeric `code`) becomes the class of its code; other
 * errors (the connection closed, ...) pass through unchanged.
 */
export function toRegistryError(error: unknown): unknown {
  if (error instanceof RegistryError) return error;
  if (error instanceof Error && typeof (error as { code?: unknown }).code === 'number') {
    const code = (error as Error & { code: number }).code;
    const data = (error as { data?: unknown }).data;
    const cls = ERROR_CLASSES.get(code) ?? RegistryError;
    return new cls(error.message, code, data);
  }
  return error;
}

// -- the client --------------------------------------------------------------------------

/** Options of {@link TerminalRegistryClient.run}: `terminal/run`'s params but the command. */
export type RunOptions = Omit<RunParams, 'command'>;

export class TerminalRegistryClient implements Disposable {
  private readonly emitters = new Map<NotificationMethod, Emitter<unknown>>();
  private registrations: Disposable[] = [];
  private connectionValue: RpcConnection;

  constructor(connection: RpcConnection) {
    for (const method of NOTIFICATION_METHODS) this.emitters.set(method, new Emitter<unknown>());
    this.connectionValue = connection;
    this.listen(connection);
  }

  /** The connection requests currently go to. */
  get connection(): RpcConnection {
    return this.connectionValue;
  }

  /**
   * Switch to another connection (a new LanguageClient after "Restart Server"):
   * listeners registered on this client stay registered.
   */
  replaceConnection(connection: RpcConnection): void {
    this.unlisten();
    this.connectionValue = connection;
    this.listen(connection);
  }

  private listen(connection: RpcConnection): void {
    // One handler per method: LanguageClient keeps only the last handler registered for
    // a method, so fan-out to many listeners happens here, not there.
    this.registrations = NOTIFICATION_METHODS.map((method) =>
      connection.onNotification(method, (params: unknown) => this.emitters.get(method)?.fire(params)),
    );
  }

  private unlisten(): void {
    for (const registration of this.registrations.splice(0)) registration.dispose();
  }

  // -- notifications -------------------------------------------------------------------

  /** Listen to one notification method. */
  on<M extends NotificationMethod>(method: M, listener: (params: NotificationMap[M]) => void): Disposable {
    const emitter = this.emitters.get(method) as Emitter<NotificationMap[M]>;
    return emitter.event(listener);
  }

  readonly onDidOpen: Event<Terminal> = (listener) => this.on('terminal/didOpen', listener);
  readonly onDidChange: Event<Terminal> = (listener) => this.on('terminal/didChange', listener);
  readonly onDidClose: Event<DidCloseParams> = (listener) => this.on('terminal/didClose', listener);
  readonly onDidStartRun: Event<DidStartRunParams> = (listener) => this.on('terminal/didStartRun', listener);
  readonly onDidWrite: Event<DidWriteParams> = (listener) => this.on('terminal/didWrite', listener);
  readonly onDidEndRun: Event<DidEndRunParams> = (listener) => this.on('terminal/didEndRun', listener);

  // -- requests ------------------------------------------------------------------------

  /** Send one request of the protocol; errors become {@link RegistryError} subclasses. */
  async request<M extends RequestMethod>(
    method: M,
    params: RequestMap[M][0],
    token?: CancellationTokenLike,
  ): Promise<RequestMap[M][1]> {
    try {
      // Never pass an undefined token: vscode-jsonrpc would count it as a second
      // parameter and send `[params, null]` instead of `params`.
      const pending =
        token === undefined
          ? this.connectionValue.sendRequest(method, params)
          : this.connectionValue.sendRequest(method, params, token);
      return (await pending) as RequestMap[M][1];
    } catch (error) {
      throw toRegistryError(error);
    }
  }

  /** A terminal for the task in `cwd`: reused (task's own first, then released ones) or new. */
  acquire(cwd: string, taskId?: string | null, provider?: Provider): Promise<Terminal> {
    return this.request('terminal/acquire', definedOnly({ cwd, taskId, provider }));
  }

  /**
   * Run a command and answer when it ends (or, with `background`, once it started).
   * Cancelling `token` interrupts the command; the promise then rejects with
   * {@link RequestCancelledError} once the server confirms.
   */
  run(command: string, options: RunOptions = {}, token?: CancellationTokenLike): Promise<RunResult> {
    const params: RunParams = definedOnly({ command, ...options });
    return this.request('terminal/run', params, token);
  }

  /**
   * Until the run ends (by `runId`, or a terminal's current run), or it waits for input
   * (unless `yieldOnInput` is false: `waitingFor` set), or `timeoutMs` passed (`state: "running"`).
   */
  wait(params: WaitParams, token?: CancellationTokenLike): Promise<RunResult> {
    return this.request('terminal/wait', definedOnly(params), token);
  }

  /** Named keys: `["q"]`, `["C-c"]`, `["Escape", ":q!", "Enter"]`; arrows follow the cursor-key mode. */
  async sendKeys(terminalId: number, keys: string[]): Promise<void> {
    await this.request('terminal/sendKeys', { terminalId, keys });
  }

  /** Raw input as typed: `"yes\r"` answers a prompt, `"\u0003"` is Ctrl-C. */
  async write(terminalId: number, data: string): Promise<void> {
    await this.request('terminal/write', { terminalId, data });
  }

  async resize(terminalId: number, cols: number, rows: number): Promise<void> {
    await this.request('terminal/resize', { terminalId, cols, rows });
  }

  /** End the running command's process tree; the terminal lives on. */
  async kill(terminalId: number): Promise<void> {
    await this.request('terminal/kill', { terminalId });
  }

  /** End the terminal's shell and everything it started. */
  async close(terminalId: number): Promise<void> {
    await this.request('terminal/close', { terminalId });
  }

  list(filter: { taskId?: string; busy?: boolean } = {}): Promise<Terminal[]> {
    return this.request('terminal/list', definedOnly(filter));
  }

  /** Output not yet retrieved (cleaned for a model), now marked retrieved. */
  async output(terminalId: number): Promise<string> {
    return (await this.request('terminal/output', { terminalId })).output;
  }

  get(terminalId: number): Promise<Terminal> {
    return this.request('terminal/get', { terminalId });
  }

  /** The most recent raw output, escapes kept, for a mirror to repaint from. */
  async replay(terminalId: number, maxBytes?: number): Promise<string> {
    return (await this.request('terminal/replay', definedOnly({ terminalId, maxBytes }))).data;
  }

  /** Unbind the task's terminals (nothing is killed). */
  async release(taskId: string): Promise<void> {
    await this.request('terminal/release', { taskId });
  }

  /** The report for a model of what the task's (and released) terminals did. */
  environmentDetails(taskId?: string, cooldownTimeoutMs?: number): Promise<EnvironmentDetailsResult> {
    const params: EnvironmentDetailsParams = definedOnly({ taskId, cooldownTimeoutMs });
    return this.request('environment/details', params);
  }

  dispose(): void {
    this.unlisten();
    for (const emitter of this.emitters.values()) emitter.dispose();
  }
}

/** A copy without the keys whose value is undefined (the server is strict on types). */
function definedOnly<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
