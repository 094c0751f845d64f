/**
 * The wire types of terminal-registry's JSON-RPC protocol, version 1
 * (docs/protocol.md is the contract; names and shapes here follow it exactly).
 *
 * Fields may be added by later servers, never renamed or removed, so every interface
 * describes what a client can rely on, not everything it may receive.
 * This module imports nothing: it is shared by the extension and plain-node code.
 */

/** The protocol version this client speaks (`capabilities.experimental.terminalRegistry.version`). */
export const PROTOCOL_VERSION = 1;

/** `ssh` and `container` run the shell elsewhere (docs/remote.md); their paths are the target's. */
export type Provider = 'shell' | 'subprocess' | 'ssh' | 'container';
export type ShellIntegration = 'pending' | 'rich' | 'none';
export type RunState = 'running' | 'completed' | 'timedOut' | 'cancelled' | 'failed';
/** What a terminal is doing (docs/waiting.md). */
export type TerminalActivity =
  | 'idle'
  | 'running'
  | 'waitingForInput'
  | 'waitingForPassword'
  | 'fullScreen'
  | 'stoppedJob';

/** What a terminal's command waits for (`Terminal.waitingFor`, `RunResult.waitingFor`). */
export interface WaitingFor {
  kind: 'input' | 'password' | 'fullScreen' | 'stoppedJob';
  /** The question on the cursor row (input, password); null otherwise. */
  prompt: string | null;
  /** The program concerned (`read` is the shell's own: `bash`). */
  program: string | null;
  /** `possibly` where the kernel cannot show it (ssh, docker exec, a busy thread). */
  certainty: 'certain' | 'possibly';
  /** Full screen: the named keys that leave it (`["q"]`), when known. */
  keys?: string[];
}

/** A terminal of the registry (`terminal/get`, `terminal/list`, `terminal/didOpen`, `terminal/didChange`). */
export interface Terminal {
  /** Integer from 1, never reused by one server. */
  id: number;
  provider: Provider;
  /** The task the terminal is bound to; `null` for a background (released) terminal. */
  taskId: string | null;
  /** The live working directory: where the shell stands now. */
  cwd: string;
  /** A command is running (submitted by `terminal/run` or typed via `terminal/write`). */
  busy: boolean;
  /** Output arrived recently (2 s; 15 s while it looks like a build). */
  hot: boolean;
  shellIntegration: ShellIntegration;
  shell: string;
  /** The shell's process; subprocess provider: the running command's, or null. */
  pid: number | null;
  /** The running or last command line. */
  lastCommand: string | null;
  /** Provider `ssh`: `user@host` (`:port` when not 22); `cwd` is a path there. */
  host?: string;
  /** Provider `container`: the container's name or id; `cwd` is a path in it. */
  container?: string;
  /** Added field (older servers: absent): what it is doing. */
  state?: TerminalActivity;
  /** Set while its command waits for input, a password, a key, or a job is stopped. */
  waitingFor?: WaitingFor;
  /** The terminal's own limits (absent when it has none). */
  limits?: Limits;
  /** How each limit is enforced here. */
  limitsBy?: Record<LimitName, LimitEnforcement>;
}

export type LimitName = 'memoryMb' | 'pids' | 'cpuSeconds' | 'outputMb' | 'wallSeconds';
/** `cgroup`: the terminal's cgroup; `rlimit`: per-process rlimits; `server`: counted by the server. */
export type LimitEnforcement = 'cgroup' | 'rlimit' | 'server' | 'none';

/** A command's resource limits: absent or null inherits, 0 means none. */
export interface Limits {
  memoryMb?: number | null;
  pids?: number | null;
  cpuSeconds?: number | null;
  outputMb?: number | null;
  wallSeconds?: number | null;
}

/** The result of `terminal/run`. */
export interface RunResult {
  runId: number;
  terminalId: number;
  commandLine: string;
  state: RunState;
  /** `null` when unknown (integration strategy `none`, or not started yet). */
  exitCode: number | null;
  /** For exit codes above 128, the signal's name (`SIGINT`, `SIGTERM`, ...). */
  signal: string | null;
  /** Text for a model: as the terminal showed it, long lines clamped, head+tail kept; says a timeout. */
  output: string;
  truncated: boolean;
  /** Where the shell stands after the command; null while a background run goes on. */
  cwd: string | null;
  durationMs: number;
  /** Subprocess provider only. */
  stdout?: string;
  /** Subprocess provider only. */
  stderr?: string;
  /** Why the run ended as it did, when that needs saying (fallback, heuristics, ...). */
  note?: string;
  /** A run still going whose terminal waits (`yieldOnInput`, `terminal/wait`). */
  waitingFor?: WaitingFor;
  /** The limit the run hit (its state is then `failed`). */
  limit?: LimitName;
  /** When `output` was cut: a file with the whole output, cleaned (removed with the terminal). */
  fullOutputPath?: string;
}

// -- request params and results ---------------------------------------------------------

export interface AcquireParams {
  cwd: string;
  taskId?: string | null;
  provider?: Provider;
  /** A shell over ssh on this host (an alias, `user@host`, `user@host:port`). */
  host?: string;
  /** A shell in this running container (docker or podman). */
  container?: string;
  /** The terminal's own limits from now on. */
  limits?: Limits;
}

export interface RunParams {
  command: string;
  /** Run in this terminal; without it a terminal is acquired and `cwd` is required. */
  terminalId?: number;
  cwd?: string;
  taskId?: string | null;
  provider?: Provider;
  timeoutMs?: number;
  env?: Record<string, string>;
  /** Answer as soon as the command has started (`state: "running"`). */
  background?: boolean;
  workDoneToken?: string | number;
  /** As in `AcquireParams`; without `cwd`, the target's home. */
  host?: string;
  container?: string;
  /** Answer as soon as the command waits for input (`waitingFor` set); default false. */
  yieldOnInput?: boolean;
  /** This run's limits, over the terminal's and the settings'. */
  limits?: Limits;
}

export interface WriteParams {
  terminalId: number;
  data: string;
}

export interface ResizeParams {
  terminalId: number;
  cols: number;
  rows: number;
}

export interface TerminalIdParams {
  terminalId: number;
}

export interface KillParams {
  terminalId: number;
  /** Only if this run is the one running (else nothing is killed). */
  runId?: number;
}

export interface OutputParams {
  terminalId: number;
  /** Only this run's output. */
  runId?: number;
  /** Leave the output unretrieved. */
  peek?: boolean;
}

export interface ListParams {
  taskId?: string;
  busy?: boolean;
}

export interface ReplayParams {
  terminalId: number;
  maxBytes?: number;
}

export interface ReleaseParams {
  taskId: string;
}

export interface EnvironmentDetailsParams {
  taskId?: string;
  cooldownTimeoutMs?: number;
  /** Report without marking the output retrieved (a person looking, not the agent). */
  peek?: boolean;
}

/** `terminal/wait`: one of `runId` and `terminalId`. */
export interface WaitParams {
  runId?: number;
  terminalId?: number;
  timeoutMs?: number;
  /** Answer at the next wait for input too (default true); false: at the end only. */
  yieldOnInput?: boolean;
}

export interface SendKeysParams {
  terminalId: number;
  /** Named keys (`Enter`, `C-c`, `Escape`, `Up`, ...) or literal text (`:q!`). */
  keys: string[];
}

export interface OutputResult {
  output: string;
}

export interface ReplayResult {
  data: string;
}

export interface EnvironmentDetailsResult {
  /** The report for a model; `""` when there is nothing to report. */
  markdown: string;
  /** The terminals the report covers. */
  terminals: Terminal[];
}

/** The `initialize` result's `capabilities.experimental.terminalRegistry`. */
export interface ServerCapabilities {
  version: number;
  providers: Provider[];
  shells: string[];
}

/** `initializationOptions`: the registry's settings (docs/protocol.md, Settings). */
export interface Settings {
  shellIntegrationTimeoutMs?: number;
  outputLineLimit?: number;
  outputCharacterLimit?: number;
  outputLineCharacterLimit?: number;
  fullOutputCapBytes?: number;
  compressProgressBar?: boolean;
  defaultShell?: string;
  commandTimeoutMs?: number | null;
  hotTimeoutMs?: number;
  hotCompilingTimeoutMs?: number;
  cooldownTimeoutMs?: number;
  integrationIdleTimeoutMs?: number;
  integrationAbsoluteTimeoutMs?: number;
  commandStartTimeoutMs?: number;
  noneQuietTimeoutMs?: number;
  killGraceMs?: number;
  runOutputCapBytes?: number;
  replayCapBytes?: number;
  fallbackToSubprocess?: boolean;
  /** Which terminals of other tasks a task may be handed: idle ones, released ones, or none. */
  reuseAcrossTasks?: 'idle' | 'released' | 'never';
  loginShell?: boolean;
  cols?: number;
  rows?: number;
  /** Every command's limits unless its terminal or run sets its own. */
  limits?: Limits;
}

// -- notifications (server -> client) ----------------------------------------------------

export interface DidCloseParams {
  terminalId: number;
}

export interface DidStartRunParams {
  terminalId: number;
  runId: number;
  commandLine: string;
}

export interface DidWriteParams {
  terminalId: number;
  /** Set for a command's output; absent or null for prompts and echo. */
  runId?: number | null;
  /** Raw output, escape sequences kept, decoded as UTF-8 without split characters. */
  data: string;
  /** Characters this client did not get while it was not reading (repaint with a replay). */
  missed?: number;
}

export interface DidEndRunParams {
  terminalId: number;
  runId: number;
  state: RunState;
  exitCode: number | null;
  /** The limit the run hit, if it hit one. */
  limit?: LimitName;
}

/** Every notification the server sends, by method name, with its params. */
export interface NotificationMap {
  'terminal/didOpen': Terminal;
  'terminal/didChange': Terminal;
  'terminal/didClose': DidCloseParams;
  'terminal/didStartRun': DidStartRunParams;
  'terminal/didWrite': DidWriteParams;
  'terminal/didEndRun': DidEndRunParams;
}

export type NotificationMethod = keyof NotificationMap;

export const NOTIFICATION_METHODS: readonly NotificationMethod[] = [
  'terminal/didOpen',
  'terminal/didChange',
  'terminal/didClose',
  'terminal/didStartRun',
  'terminal/didWrite',
  'terminal/didEndRun',
];

/** Every request, by method name: its params and its result. */
export interface RequestMap {
  'terminal/acquire': [AcquireParams, Terminal];
  'terminal/run': [RunParams, RunResult];
  'terminal/write': [WriteParams, null];
  'terminal/resize': [ResizeParams, null];
  'terminal/kill': [KillParams, null];
  'terminal/close': [TerminalIdParams, null];
  'terminal/list': [ListParams, Terminal[]];
  'terminal/output': [OutputParams, OutputResult];
  'terminal/get': [TerminalIdParams, Terminal];
  'terminal/replay': [ReplayParams, ReplayResult];
  'terminal/release': [ReleaseParams, null];
  'environment/details': [EnvironmentDetailsParams, EnvironmentDetailsResult];
  'terminal/wait': [WaitParams, RunResult];
  'terminal/sendKeys': [SendKeysParams, null];
}

export type RequestMethod = keyof RequestMap;

// -- errors ------------------------------------------------------------------------------

/** JSON-RPC error codes the server answers with (docs/protocol.md, Errors). */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  RequestCancelled: -32800,
  UnknownTerminal: -32001,
  TerminalBusy: -32002,
  SpawnFailed: -32003,
} as const;

export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];
