/**
 * A real VS Code for the end-to-end test: code-server (VS Code's server and web UI,
 * from npm) installed once into a cache, then started on 127.0.0.1 with a profile of
 * its own (home, user data, extensions, settings, a two-folder workspace) and the
 * built .vsix installed. Every process it starts carries a tag in its environment, so
 * what outlives it is found by that tag, never by a name across the machine.
 */

import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** The newest code-server that runs on Node.js 20 (4.103 and later need Node.js 22). */
export const CODE_SERVER_VERSION = '4.100.3';
/**
 * code-server 4.100.3's @vscode/ripgrep downloads this asset into its cache unless the
 * file is already there; the machines here reach no such host, so Debian's rg is put
 * there instead (the asset holds one file, `rg`).
 */
const RIPGREP_CACHE = 'vscode-ripgrep-cache-1.15.11';
const RIPGREP_ASSET = 'ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz';

/** The environment variable whose value marks every process of one code-server run. */
export const TAG_VARIABLE = 'TERMINAL_REGISTRY_E2E_TAG';

export type Log = (line: string) => void;

export function cacheRoot(): string {
  return process.env.TERMINAL_REGISTRY_E2E_CACHE ?? path.join(os.homedir(), '.cache', 'terminal-registry-e2e');
}

/**
 * code-server's entry point, installed into the cache on first use. An install is
 * built in a staging folder and renamed into place when complete, so an interrupted
 * one is never taken for a good one.
 */
export async function ensureCodeServer(log: Log): Promise<string> {
  const root = cacheRoot();
  const installDir = path.join(root, `code-server-${CODE_SERVER_VERSION}`);
  const entry = path.join(installDir, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
  if (fs.existsSync(path.join(installDir, '.complete'))) return entry;

  const rg = findOnPath('rg');
  if (!rg) throw new Error("code-server's install needs ripgrep: apt-get install ripgrep");
  if (!findOnPath('krb5-config')) throw new Error("code-server's install builds kerberos from source: apt-get install libkrb5-dev");

  fs.mkdirSync(root, { recursive: true });
  const staging = fs.mkdtempSync(path.join(root, 'staging-'));
  try {
    const tmp = path.join(staging, 'tmp');
    const ripgrepCache = path.join(tmp, RIPGREP_CACHE);
    fs.mkdirSync(ripgrepCache, { recursive: true });
    const rgDir = path.join(staging, 'rg');
    fs.mkdirSync(rgDir);
    fs.copyFileSync(rg, path.join(rgDir, 'rg'));
    await run('tar', ['-czf', path.join(ripgrepCache, RIPGREP_ASSET), '-C', rgDir, 'rg'], {}, log);
    fs.writeFileSync(path.join(staging, 'package.json'), JSON.stringify({ private: true }));
    log(`installing code-server ${CODE_SERVER_VERSION} into ${installDir} (once; about 2 minutes)`);
    await run(
      'npm',
      ['install', '--no-save', '--no-audit', '--no-fund', '--loglevel=error', `code-server@${CODE_SERVER_VERSION}`],
      {
        cwd: staging,
        env: {
          ...process.env,
          // @vscode/ripgrep looks for its cached download under os.tmpdir().
          TMPDIR: tmp,
          // As root, node-pty's postinstall runs `npx node-gyp`: without these it stops
          // at a permission drop or a "Need to install" prompt.
          npm_config_unsafe_perm: 'true',
          npm_config_yes: 'true',
          // npm 11 skips dependencies' install scripts unless allowed; code-server's
          // own postinstall installs VS Code's modules, which build native addons.
          npm_config_dangerously_allow_all_scripts: 'true',
        },
      },
      log,
    );
    const bundledRg = path.join(
      staging, 'node_modules', 'code-server', 'lib', 'vscode', 'node_modules', '@vscode', 'ripgrep', 'bin', 'rg',
    );
    if (!fs.existsSync(bundledRg)) throw new Error(`code-server installed without ${bundledRg}`);
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.rmSync(rgDir, { recursive: true, force: true });
    fs.writeFileSync(path.join(staging, '.complete'), `${CODE_SERVER_VERSION}\n`);
    fs.rmSync(installDir, { recursive: true, force: true });
    fs.renameSync(staging, installDir);
  } catch (error) {
    fs.rmSync(staging, { recursive: true, force: true });
    throw error;
  }
  return entry;
}

export interface ProfileOptions {
  /** A fresh folder: the run's home, profile and workspace live in it. */
  root: string;
  /** Workspace folders to create under the home, by name. */
  folders: string[];
  /** User settings (settings.json). */
  settings: Record<string, unknown>;
}

export interface Profile {
  root: string;
  home: string;
  userDataDir: string;
  extensionsDir: string;
  configFile: string;
  workspaceFile: string;
  folders: string[];
}

/** A profile nothing else has touched: its own home (so `~` is the run's), user data and extensions. */
export function createProfile(options: ProfileOptions): Profile {
  const home = path.join(options.root, 'home');
  const profile: Profile = {
    root: options.root,
    home,
    userDataDir: path.join(options.root, 'user-data'),
    extensionsDir: path.join(options.root, 'extensions'),
    configFile: path.join(options.root, 'code-server.yaml'),
    workspaceFile: path.join(home, 'demo.code-workspace'),
    folders: options.folders.map((name) => path.join(home, name)),
  };
  for (const dir of [home, profile.extensionsDir, path.join(profile.userDataDir, 'User'), ...profile.folders]) {
    fs.mkdirSync(dir, { recursive: true });
  }
  fs.writeFileSync(path.join(profile.userDataDir, 'User', 'settings.json'), JSON.stringify(options.settings, null, 2));
  fs.writeFileSync(profile.workspaceFile, JSON.stringify({ folders: profile.folders.map((folder) => ({ path: folder })) }, null, 2));
  // Only what code-server reads; `auth: none` and the address are on the command line.
  fs.writeFileSync(profile.configFile, 'cert: false\n');
  return profile;
}

export interface TaggedProcess {
  pid: number;
  ppid: number;
  command: string;
}

export class CodeServer {
  readonly tag = randomBytes(8).toString('hex');
  private child: ChildProcess | undefined;
  private output = '';
  url = '';

  constructor(
    private readonly entry: string,
    readonly profile: Profile,
    private readonly log: Log,
  ) {}

  /** The environment of code-server and so of everything it starts: the run's home and tag. */
  private environment(): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    for (const [name, value] of Object.entries(process.env)) {
      // Not the variables of a VS Code this test may itself be running in.
      if (!name.startsWith('VSCODE_') && name !== 'PASSWORD' && name !== 'HASHED_PASSWORD') env[name] = value;
    }
    return { ...env, HOME: this.profile.home, SHELL: '/bin/bash', [TAG_VARIABLE]: this.tag };
  }

  private baseArgs(): string[] {
    return [
      this.entry,
      '--config', this.profile.configFile,
      '--user-data-dir', this.profile.userDataDir,
      '--extensions-dir', this.profile.extensionsDir,
    ];
  }

  async installExtension(vsix: string): Promise<void> {
    await run(process.execPath, [...this.baseArgs(), '--install-extension', vsix], { env: this.environment() }, this.log);
  }

  /** Starts code-server on a free port of 127.0.0.1 and resolves with its URL. */
  async start(timeoutMs = 60000): Promise<string> {
    const child = spawn(
      process.execPath,
      [
        ...this.baseArgs(),
        '--auth', 'none',
        '--bind-addr', '127.0.0.1:0',
        '--disable-telemetry',
        '--disable-update-check',
        '--disable-workspace-trust',
        '--disable-getting-started-override',
        '--ignore-last-opened',
        this.profile.workspaceFile,
      ],
      // Its own process group: a last-resort kill reaches the helpers it forks.
      { env: this.environment(), cwd: this.profile.home, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    this.child = child;
    const listening = new Promise<string>((resolve, reject) => {
      const onData = (data: Buffer) => {
        this.output += data.toString();
        const match = /HTTP server listening on (http:\/\/127\.0\.0\.1:\d+)\//.exec(this.output);
        if (match) resolve(match[1]);
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('exit', (code, signal) =>
        reject(new Error(`code-server exited (${code ?? signal}) before listening:\n${this.output}`)),
      );
      child.once('error', reject);
    });
    this.url = await withTimeout(listening, timeoutMs, 'code-server to listen');
    return this.url;
  }

  /** What code-server printed (its own log). */
  get stdout(): string {
    return this.output;
  }

  /**
   * Stops code-server as a user would (SIGTERM), then waits until every process of the
   * run has ended. Resolves with the ones still alive after `graceMs` — the leaks —
   * having killed them so that nothing stays behind.
   */
  async stop(graceMs = 20000): Promise<TaggedProcess[]> {
    const child = this.child;
    if (!child) return [];
    this.child = undefined;
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      try {
        await withTimeout(exited, graceMs, 'code-server to exit');
      } catch {
        this.log('code-server did not exit on SIGTERM; killing its process group');
        killGroup(child.pid);
        await exited;
      }
    }
    const exitedAt = Date.now();
    const survivors = await waitUntilGone(() => taggedProcesses(this.tag), graceMs);
    if (survivors.length === 0) this.log(`every process of the run ended ${Date.now() - exitedAt} ms after code-server`);
    for (const proc of survivors) {
      try {
        process.kill(proc.pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
    return survivors;
  }

  /** Every `[error]` line of the extension host logs of this run. */
  extensionHostErrors(): string[] {
    const hostLogs = logFiles(
      path.join(this.profile.userDataDir, 'logs'),
      (file) => /^exthost\d*$/.test(path.basename(path.dirname(file))) && file.endsWith('.log'),
    );
    return hostLogs.flatMap((file) =>
      fs
        .readFileSync(file, 'utf8')
        .split('\n')
        .filter((line) => /\[error\]/i.test(line))
        .map((line) => `${path.relative(this.profile.userDataDir, file)}: ${line}`),
    );
  }

  /** The text of an extension's output channel, from the files VS Code writes them to. */
  outputChannel(name: string): string {
    return logFiles(path.join(this.profile.userDataDir, 'logs'), (file) => path.basename(file).replace(/^\d+-/, '') === `${name}.log`)
      .map((file) => fs.readFileSync(file, 'utf8'))
      .join('');
  }

  /** The extension host log (activation events and the like). */
  extensionHostLog(): string {
    return logFiles(path.join(this.profile.userDataDir, 'logs'), (file) => path.basename(file) === 'remoteexthost.log')
      .map((file) => fs.readFileSync(file, 'utf8'))
      .join('');
  }
}

/** Processes whose environment carries `TAG_VARIABLE=tag` (read from /proc). */
export function taggedProcesses(tag: string): TaggedProcess[] {
  const needle = Buffer.from(`\0${TAG_VARIABLE}=${tag}\0`);
  const found: TaggedProcess[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const environ = fs.readFileSync(`/proc/${name}/environ`);
      if (!Buffer.concat([Buffer.from([0]), environ]).includes(needle)) continue;
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces): state, ppid, ...
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z') continue; // a zombie has ended; its parent just has not reaped it
      const command = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ').trim();
      found.push({ pid: Number(name), ppid: Number(fields[1]), command });
    } catch {
      // Ended while being read, or not ours to read.
    }
  }
  return found;
}

/**
 * Resolves with what `list()` still returns once it is empty or `timeoutMs` has
 * passed. Processes that are not our children give no event on exit, so /proc is
 * read again every 100 ms until then.
 */
export async function waitUntilGone<T>(list: () => T[], timeoutMs: number): Promise<T[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = list();
    if (left.length === 0 || Date.now() >= deadline) return left;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

function logFiles(dir: string, keep: (file: string) => boolean): string[] {
  if (!fs.existsSync(dir)) return [];
  const files: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const file = path.join(entry.parentPath, entry.name);
    if (entry.isFile() && keep(file)) files.push(file);
  }
  return files.sort();
}

export function findOnPath(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, command);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/** Runs a command to its end, its output passed to `log` line by line; rejects on failure. */
export function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv },
  log: Log,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const onData = (data: Buffer) => {
      output += data.toString();
      for (const line of data.toString().split('\n')) if (line.trim()) log(`  ${line}`);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (code === 0) resolve(output);
      else reject(new Error(`${command} ${args.join(' ')} failed (${code ?? signal}):\n${output.slice(-4000)}`));
    });
  });
}

export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
