/**
 * The extension: starts `terminal-registry serve --stdio` through vscode-languageclient
 * (it frames JSON-RPC, restarts a crashed server and logs to an output channel; no
 * document is synced), shows the registry's terminals in a tree, mirrors them as VS
 * Code terminals, and returns an API for agent extensions.
 */

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions, State } from 'vscode-languageclient/node';
import { TerminalRegistryApi, createApi } from './api';
import { RequestCancelledError, TerminalRegistryClient } from './client';
import { DETAILS_SCHEME, EnvironmentDetailsDocuments } from './detailsDocuments';
import { RegistryLanguageClient } from './languageClient';
import { TerminalModel } from './model';
import { PROTOCOL_VERSION, RunResult, Terminal } from './protocol';
import { MirrorPseudoterminal } from './pty';
import { resolveServerCommand } from './serverCommand';
import { RegistryNode, TerminalTreeProvider } from './tree';

const VIEW_ID = 'terminalRegistry.terminals';
const CONFIG = 'terminalRegistry';

let session: Session | undefined;

export function activate(context: vscode.ExtensionContext): TerminalRegistryApi {
  session = new Session();
  context.subscriptions.push(session);
  session.startServer();
  return createApi(session.client);
}

export async function deactivate(): Promise<void> {
  // Awaited by VS Code: the server gets shutdown + exit and ends its terminals.
  await session?.stopServer();
  session = undefined;
}

class Session implements vscode.Disposable {
  readonly client: TerminalRegistryClient;
  private languageClient: LanguageClient;
  private languageClientState: vscode.Disposable | undefined;
  private readonly model = new TerminalModel();
  private readonly tree: TerminalTreeProvider;
  private readonly view: vscode.TreeView<RegistryNode>;
  private readonly serverLog = vscode.window.createOutputChannel('Terminal Registry');
  private readonly runLog = vscode.window.createOutputChannel('Terminal Registry Runs');
  private readonly details = new EnvironmentDetailsDocuments();
  private readonly mirrors = new Map<number, { terminal: vscode.Terminal; pty: MirrorPseudoterminal }>();
  private readonly disposables: vscode.Disposable[] = [];
  private lastTaskId = 'vscode';

  constructor() {
    this.languageClient = this.createLanguageClient();
    this.client = new TerminalRegistryClient(this.languageClient);
    this.disposables.push(this.model.attach(this.client));
    this.tree = new TerminalTreeProvider(this.model, os.homedir());
    this.view = vscode.window.createTreeView(VIEW_ID, { treeDataProvider: this.tree, showCollapseAll: true });
    this.disposables.push(
      this.tree,
      this.view,
      this.view.onDidCollapseElement((event) => this.tree.expansionChanged(event.element, false)),
      this.view.onDidExpandElement((event) => this.tree.expansionChanged(event.element, true)),
      this.serverLog,
      this.runLog,
      this.details,
      vscode.workspace.registerTextDocumentContentProvider(DETAILS_SCHEME, this.details),
      vscode.window.onDidCloseTerminal((closed) => {
        for (const [id, mirror] of this.mirrors) if (mirror.terminal === closed) this.mirrors.delete(id);
      }),
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (event.affectsConfiguration(`${CONFIG}.server`)) void this.offerRestart();
      }),
      ...this.registerCommands(),
    );
  }

  // -- the server ----------------------------------------------------------------------

  private createLanguageClient(): LanguageClient {
    const config = vscode.workspace.getConfiguration(CONFIG);
    const folders = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
    const server = resolveServerCommand(config.get('server.command'), folders, isExecutable);
    const serverOptions: ServerOptions = {
      command: server.command,
      args: server.args,
      options: { cwd: folders[0] ?? os.homedir() },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [],
      // A function: read again on every (re)start, so a crash restart picks up edits.
      initializationOptions: () => vscode.workspace.getConfiguration(CONFIG).get<object>('server.initializationOptions') ?? {},
      outputChannel: this.serverLog,
    };
    this.serverLog.appendLine(`starting ${[server.command, ...server.args].join(' ')}`);
    const languageClient = new RegistryLanguageClient('terminalRegistry', 'Terminal Registry', serverOptions, clientOptions);
    this.languageClientState?.dispose();
    this.languageClientState = languageClient.onDidChangeState(({ newState }) => this.onServerState(newState));
    return languageClient;
  }

  startServer(): void {
    this.view.message = 'Starting terminal-registry…';
    this.languageClient.start().catch((error: unknown) => {
      const message = error instanceof Error ? error.message : String(error);
      this.view.message = `The terminal-registry server did not start: ${message}`;
      void vscode.window
        .showErrorMessage(
          `Terminal Registry: the server did not start (${message}). Install terminal-registry or set terminalRegistry.server.command.`,
          'Open Settings',
          'Show Log',
        )
        .then((choice) => {
          if (choice === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', CONFIG);
          if (choice === 'Show Log') this.serverLog.show();
        });
    });
  }

  async stopServer(): Promise<void> {
    await stopLanguageClient(this.languageClient);
  }

  /** A new LanguageClient from the current settings; the client, model and API keep going. */
  async restartServer(): Promise<void> {
    const old = this.languageClient;
    this.languageClientState?.dispose();
    this.languageClientState = undefined;
    this.onServerState(State.Stopped);
    await stopLanguageClient(old);
    await old.dispose().catch(() => undefined);
    this.languageClient = this.createLanguageClient();
    this.client.replaceConnection(this.languageClient);
    this.startServer();
  }

  private onServerState(state: State): void {
    if (state === State.Running) {
      this.view.message = undefined;
      const info = this.languageClient.initializeResult?.capabilities.experimental as
        | { terminalRegistry?: { version?: number } }
        | undefined;
      const version = info?.terminalRegistry?.version;
      if (version !== undefined && version !== PROTOCOL_VERSION) {
        void vscode.window.showWarningMessage(
          `Terminal Registry: the server speaks protocol version ${version}; this extension knows ${PROTOCOL_VERSION}.`,
        );
      }
      // A (re)started server has its own terminals: the model starts over from its list.
      this.model.reload(this.client).catch((error: unknown) => this.serverLog.appendLine(`terminal/list failed: ${error}`));
      return;
    }
    // Starting (after a crash) or stopped: the old server's terminals are gone, and
    // terminal ids will be reused by the next server, so no mirror may stay attached.
    this.model.reset();
    for (const { pty } of this.mirrors.values()) pty.mirror.detach('the terminal-registry server stopped; this mirror is closed');
    this.mirrors.clear();
    if (state === State.Stopped) this.view.message = 'The terminal-registry server is not running.';
  }

  private async offerRestart(): Promise<void> {
    const choice = await vscode.window.showInformationMessage(
      'Terminal Registry: restart the server to apply the changed settings? Its terminals will be closed.',
      'Restart',
    );
    if (choice === 'Restart') await this.restartServer();
  }

  // -- commands ------------------------------------------------------------------------

  private registerCommands(): vscode.Disposable[] {
    const command = (id: string, handler: (...args: never[]) => Promise<void>) =>
      vscode.commands.registerCommand(id, async (...args: never[]) => {
        try {
          await handler(...args);
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          void vscode.window.showErrorMessage(`Terminal Registry: ${message}`);
        }
      });
    return [
      command('terminalRegistry.runCommand', () => this.runCommand()),
      command('terminalRegistry.showEnvironmentDetails', () => this.showEnvironmentDetails()),
      command('terminalRegistry.restartServer', () => this.restartServer()),
      command('terminalRegistry.showTerminal', (node?: RegistryNode) => this.showTerminal(this.pick(node))),
      command('terminalRegistry.killCommand', (node?: RegistryNode) => this.kill(this.pick(node))),
      command('terminalRegistry.closeTerminal', (node?: RegistryNode) => this.closeTerminal(this.pick(node))),
      command('terminalRegistry.copyCwd', (node?: RegistryNode) => this.copyCwd(this.pick(node))),
    ];
  }

  /** The terminal a context command is about: its tree node, else the view's selection. */
  private pick(node: RegistryNode | undefined): Terminal {
    const chosen = node ?? this.view.selection[0];
    if (chosen?.kind !== 'terminal') throw new Error('select a terminal in the Terminal Registry view first');
    // The node may be older than the latest didChange: prefer the model's copy.
    return this.model.get(chosen.terminal.id) ?? chosen.terminal;
  }

  private async runCommand(): Promise<void> {
    const taskId = await vscode.window.showInputBox({
      title: 'Run Command in a Task Terminal (1/3)',
      prompt: 'Task id: the task\'s idle terminals are reused. Empty: no task (a background terminal).',
      value: this.lastTaskId,
    });
    if (taskId === undefined) return;
    const defaultCwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? os.homedir();
    const cwd = await vscode.window.showInputBox({
      title: 'Run Command in a Task Terminal (2/3)',
      prompt: 'Working directory',
      value: defaultCwd,
      validateInput: (value) => (value.trim() === '' ? 'a working directory is needed' : undefined),
    });
    if (cwd === undefined) return;
    const commandLine = await vscode.window.showInputBox({
      title: 'Run Command in a Task Terminal (3/3)',
      prompt: `Command line, run by the shell in ${cwd}`,
      placeHolder: 'make test',
      validateInput: (value) => (value.trim() === '' ? 'a command is needed' : undefined),
    });
    if (commandLine === undefined) return;
    if (taskId.trim() !== '') this.lastTaskId = taskId.trim();

    let result: RunResult;
    try {
      result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `Running ${commandLine}`, cancellable: true },
        (_progress, token) =>
          this.client.run(commandLine, { cwd: cwd.trim(), taskId: taskId.trim() === '' ? null : taskId.trim() }, token),
      );
    } catch (error) {
      if (error instanceof RequestCancelledError) {
        void vscode.window.showInformationMessage(`Terminal Registry: ${commandLine} was interrupted.`);
        return;
      }
      throw error;
    }
    this.logRun(result);
    // The result, once the view's row shows how it ended (not a spinner beside it).
    await this.tree.caughtUp(result.terminalId, this.view.visible ? 500 : 0);
    const summary = `${result.commandLine}: exit code ${result.exitCode ?? 'unknown'} (${result.state}), cwd ${result.cwd ?? '?'}`;
    const choice =
      result.exitCode === 0
        ? await vscode.window.showInformationMessage(summary, 'Show Output', 'Show Terminal')
        : await vscode.window.showWarningMessage(summary, 'Show Output', 'Show Terminal');
    if (choice === 'Show Output') this.runLog.show(true);
    if (choice === 'Show Terminal') {
      const terminal = this.model.get(result.terminalId);
      if (terminal) this.showTerminal(terminal);
    }
  }

  private logRun(result: RunResult): void {
    const log = this.runLog;
    log.appendLine(`$ ${result.commandLine}    [terminal ${result.terminalId}, run ${result.runId}]`);
    if (result.output) log.append(result.output.endsWith('\n') ? result.output : result.output + '\n');
    const signal = result.signal ? ` (${result.signal})` : '';
    log.appendLine(
      `[exit code ${result.exitCode ?? 'unknown'}${signal} · ${result.state} · cwd ${result.cwd ?? '?'} · ${result.durationMs} ms` +
        `${result.truncated ? ' · output truncated' : ''}]`,
    );
    if (result.note) log.appendLine(`[note: ${result.note}]`);
    log.appendLine('');
  }

  private async showEnvironmentDetails(): Promise<void> {
    const taskId = await vscode.window.showInputBox({
      title: 'Show Environment Details',
      prompt: 'Task id (empty: released terminals only). Reported output counts as retrieved, as for an agent.',
      value: this.lastTaskId,
    });
    if (taskId === undefined) return;
    const details = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'Waiting for busy terminals to cool down…' },
      () => this.client.environmentDetails(taskId.trim() === '' ? undefined : taskId.trim()),
    );
    if (details.markdown === '') {
      void vscode.window.showInformationMessage('Terminal Registry: nothing to report.');
      return;
    }
    const uri = this.details.publish(taskId.trim() === '' ? undefined : taskId.trim(), details.markdown);
    await vscode.commands.executeCommand('markdown.showPreview', uri);
  }

  private async showTerminal(terminal: Terminal): Promise<void> {
    const existing = this.mirrors.get(terminal.id);
    if (existing) {
      existing.terminal.show();
      return;
    }
    const pty = new MirrorPseudoterminal(this.client, terminal.id, () => {
      // Closed on the registry's side: the VS Code terminal stays to show why, but a
      // later "Show" must not find it.
      if (this.mirrors.get(terminal.id)?.pty === pty) this.mirrors.delete(terminal.id);
    });
    const vscodeTerminal = vscode.window.createTerminal({
      name: `Registry ${terminal.id}: ${terminal.taskId ?? 'background'}`,
      pty,
      iconPath: new vscode.ThemeIcon('terminal'),
    });
    this.mirrors.set(terminal.id, { terminal: vscodeTerminal, pty });
    vscodeTerminal.show();
  }

  private async kill(terminal: Terminal): Promise<void> {
    await this.client.kill(terminal.id);
  }

  private async closeTerminal(terminal: Terminal): Promise<void> {
    if (terminal.busy) {
      const choice = await vscode.window.showWarningMessage(
        `Terminal ${terminal.id} is running ${terminal.lastCommand ?? 'a command'}. Close it and end the command?`,
        { modal: true },
        'Close',
      );
      if (choice !== 'Close') return;
    }
    await this.client.close(terminal.id);
  }

  private async copyCwd(terminal: Terminal): Promise<void> {
    await vscode.env.clipboard.writeText(terminal.cwd);
    vscode.window.setStatusBarMessage(`Copied ${terminal.cwd}`, 3000);
  }

  dispose(): void {
    this.languageClientState?.dispose();
    for (const { pty } of this.mirrors.values()) pty.mirror.dispose();
    this.mirrors.clear();
    this.client.dispose();
    this.model.dispose();
    for (const disposable of this.disposables.splice(0)) disposable.dispose();
    // The LanguageClient is stopped by deactivate(), which VS Code awaits.
  }
}

/** shutdown + exit; the server then ends its terminals. Never throws. */
async function stopLanguageClient(languageClient: LanguageClient): Promise<void> {
  // A client still starting cannot be stopped (it throws): let it come up first.
  if (languageClient.state === State.Starting) await languageClient.start().catch(() => undefined);
  if (!languageClient.isRunning()) return;
  try {
    await languageClient.stop(5000);
  } catch {
    // Timed out: the LanguageClient kills the process itself shortly after.
  }
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}
