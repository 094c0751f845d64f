/**
 * A stand-in for the VS Code extension host, good enough to activate the real bundle
 * (dist/extension.js, vscode-languageclient included) in plain node: the parts of the
 * `vscode` API the extension uses are modelled and recorded; everything else the
 * LanguageClient touches (language features it registers, and so on) is a no-op that
 * returns a disposable.
 */

import Module from 'node:module';
import { Emitter } from '../../src/events';
import { EventEmitter, ThemeIcon, TreeItem, TreeItemCollapsibleState } from './fakeVscode';

type AnyFunction = (...args: any[]) => any;

const disposable = () => ({ dispose: () => undefined });
const noEvent = () => disposable();

/** Namespaces answer what they model; anything else is a no-op (an event if named on...). */
function namespace<T extends object>(known: T): T {
  return new Proxy(known, {
    get(target, property, receiver) {
      if (property in target) return Reflect.get(target, property, receiver);
      if (typeof property !== 'string' || property === 'then') return undefined;
      return property.startsWith('on') ? noEvent : disposable;
    },
  });
}

class Uri {
  private constructor(
    readonly scheme: string,
    readonly fsPath: string,
  ) {}
  get path(): string {
    return this.fsPath;
  }
  static file(path: string): Uri {
    return new Uri('file', path);
  }
  static from(components: { scheme: string; path: string }): Uri {
    return new Uri(components.scheme, components.path);
  }
  static parse(value: string): Uri {
    const match = /^([a-z][\w+.-]*):(.*)$/i.exec(value);
    return match ? new Uri(match[1], match[2].replace(/^\/\//, '')) : new Uri('file', value);
  }
  toString(): string {
    return `${this.scheme}://${this.fsPath}`;
  }
}

class Disposable {
  constructor(private readonly callOnDispose: () => void) {}
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((i) => i.dispose()));
  }
  dispose(): void {
    this.callOnDispose();
  }
}

class CancellationTokenSource {
  private readonly emitter = new Emitter<void>();
  readonly token = {
    isCancellationRequested: false,
    onCancellationRequested: this.emitter.event,
  };
  cancel(): void {
    if (this.token.isCancellationRequested) return;
    this.token.isCancellationRequested = true;
    this.emitter.fire();
  }
  dispose(): void {
    this.emitter.dispose();
  }
}

class CancellationError extends Error {}

export interface FakeTreeView {
  treeDataProvider: {
    getChildren(element?: unknown): unknown[];
    getTreeItem(element: unknown): TreeItem;
    onDidChangeTreeData(listener: () => void): { dispose(): void };
  };
  selection: unknown[];
  message: string | undefined;
  onMessage: Emitter<string | undefined>;
  /** The person collapsing and expanding rows (fire these to act as them). */
  collapse: Emitter<{ element: unknown }>;
  expand: Emitter<{ element: unknown }>;
}

export interface FakeTerminal {
  name: string;
  pty: {
    onDidWrite(listener: (text: string) => void): { dispose(): void };
    open(dimensions?: { columns: number; rows: number }): void;
    close(): void;
    handleInput?(data: string): void;
  };
  shown: number;
}

export interface FakeContentProvider {
  provideTextDocumentContent(uri: unknown): string | Promise<string>;
}

export interface FakeHost {
  config: Record<string, unknown>;
  workspaceFolders: string[];
  commands: Map<string, AnyFunction>;
  treeViews: Map<string, FakeTreeView>;
  terminals: FakeTerminal[];
  outputs: Map<string, string>;
  messages: { level: string; text: string }[];
  onMessage: Emitter<string>;
  executed: { command: string; args: unknown[] }[];
  documents: { language: string; content: string; uri: Uri }[];
  /** Text document content providers, by scheme. */
  contentProviders: Map<string, FakeContentProvider>;
  clipboard: string;
  /** What showInputBox answers next, in order (undefined: the user pressed Escape). */
  inputAnswers: (string | undefined)[];
  closeTerminal(terminal: FakeTerminal): void;
}

const FAKE_ID = '/fake/extension-host/node_modules/vscode/index.js';

export function installFakeVscodeHost(options: { config: Record<string, unknown>; workspaceFolders: string[] }): FakeHost {
  const closeTerminalEmitter = new Emitter<FakeTerminal>();
  const host: FakeHost = {
    config: options.config,
    workspaceFolders: options.workspaceFolders,
    commands: new Map(),
    treeViews: new Map(),
    terminals: [],
    outputs: new Map(),
    messages: [],
    onMessage: new Emitter<string>(),
    executed: [],
    documents: [],
    contentProviders: new Map(),
    clipboard: '',
    inputAnswers: [],
    closeTerminal(terminal) {
      terminal.pty.close();
      closeTerminalEmitter.fire(terminal);
    },
  };

  const message = (level: string) => async (text: string) => {
    host.messages.push({ level, text });
    host.onMessage.fire(text);
    return undefined;
  };

  const window = namespace({
    createOutputChannel(name: string) {
      host.outputs.set(name, '');
      const add = (text: string) => host.outputs.set(name, (host.outputs.get(name) ?? '') + text);
      return {
        name,
        append: add,
        appendLine: (text: string) => add(text + '\n'),
        replace: (text: string) => host.outputs.set(name, text),
        clear: () => host.outputs.set(name, ''),
        show: () => undefined,
        hide: () => undefined,
        dispose: () => undefined,
      };
    },
    createTreeView(id: string, opts: { treeDataProvider: FakeTreeView['treeDataProvider'] }) {
      const onMessage = new Emitter<string | undefined>();
      let current: string | undefined;
      const view: FakeTreeView = {
        treeDataProvider: opts.treeDataProvider,
        selection: [],
        get message() {
          return current;
        },
        set message(value) {
          current = value;
          onMessage.fire(value);
        },
        onMessage,
        collapse: new Emitter<{ element: unknown }>(),
        expand: new Emitter<{ element: unknown }>(),
      };
      host.treeViews.set(id, view);
      return Object.assign(view, {
        onDidCollapseElement: view.collapse.event,
        onDidExpandElement: view.expand.event,
        dispose: () => undefined,
      });
    },
    createTerminal(opts: { name: string; pty: FakeTerminal['pty'] }) {
      const terminal: FakeTerminal = { name: opts.name, pty: opts.pty, shown: 0 };
      host.terminals.push(terminal);
      return Object.assign(terminal, { show: () => terminal.shown++, dispose: () => host.closeTerminal(terminal) });
    },
    onDidCloseTerminal: closeTerminalEmitter.event,
    async showInputBox() {
      if (host.inputAnswers.length === 0) throw new Error('showInputBox: no answer queued');
      return host.inputAnswers.shift();
    },
    async withProgress(_options: unknown, task: AnyFunction) {
      const source = new CancellationTokenSource();
      return task({ report: () => undefined }, source.token);
    },
    showInformationMessage: message('info'),
    showWarningMessage: message('warning'),
    showErrorMessage: message('error'),
    setStatusBarMessage: (text: string) => {
      host.messages.push({ level: 'status', text });
      return disposable();
    },
    activeTextEditor: undefined,
    visibleTextEditors: [],
    tabGroups: { all: [], onDidChangeTabs: noEvent, onDidChangeTabGroups: noEvent },
  });

  const workspace = namespace({
    getConfiguration(section?: string) {
      const prefix = section ? `${section}.` : '';
      return {
        get: <T>(key: string, fallback?: T) => (host.config[prefix + key] as T | undefined) ?? fallback,
        has: (key: string) => prefix + key in host.config,
        inspect: () => undefined,
        update: async () => undefined,
      };
    },
    get workspaceFolders() {
      return host.workspaceFolders.map((folder, index) => ({ uri: Uri.file(folder), name: folder, index }));
    },
    textDocuments: [],
    async openTextDocument(opts: { language: string; content: string }) {
      const document = { ...opts, uri: Uri.parse(`untitled:Untitled-${host.documents.length + 1}`) };
      host.documents.push(document);
      return document;
    },
    registerTextDocumentContentProvider(scheme: string, provider: FakeContentProvider) {
      host.contentProviders.set(scheme, provider);
      return { dispose: () => host.contentProviders.delete(scheme) };
    },
    createFileSystemWatcher: () => ({ ...disposable(), onDidCreate: noEvent, onDidChange: noEvent, onDidDelete: noEvent }),
  });

  const commands = namespace({
    registerCommand(id: string, handler: AnyFunction) {
      host.commands.set(id, handler);
      return { dispose: () => host.commands.delete(id) };
    },
    async executeCommand(command: string, ...args: unknown[]) {
      host.executed.push({ command, args });
      return undefined;
    },
  });

  const languages = namespace({
    match: () => 0,
    createDiagnosticCollection: () => ({
      set: () => undefined,
      delete: () => undefined,
      clear: () => undefined,
      forEach: () => undefined,
      get: () => undefined,
      has: () => false,
      dispose: () => undefined,
    }),
  });

  const env = namespace({
    appName: 'Fake Code',
    language: 'en',
    clipboard: {
      readText: async () => host.clipboard,
      writeText: async (text: string) => {
        host.clipboard = text;
      },
    },
  });

  class TabInput {}
  const vscode = {
    version: '1.90.0',
    window,
    workspace,
    commands,
    languages,
    env,
    Uri,
    Disposable,
    EventEmitter,
    CancellationTokenSource,
    CancellationError,
    ThemeIcon,
    TreeItem,
    TreeItemCollapsibleState,
    ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
    TabInputText: TabInput,
    TabInputTextDiff: TabInput,
    TabInputCustom: TabInput,
    TabInputNotebook: TabInput,
    TabInputNotebookDiff: TabInput,
  };

  const internals = Module as unknown as { _resolveFilename(request: string, ...rest: unknown[]): string };
  const original = internals._resolveFilename;
  internals._resolveFilename = function (this: unknown, request: string, ...rest: unknown[]): string {
    return request === 'vscode' ? FAKE_ID : original.call(this, request, ...rest);
  };
  const fake = new Module(FAKE_ID);
  fake.filename = FAKE_ID;
  fake.loaded = true;
  // What is not modelled: a class for capitalised names (the LanguageClient subclasses
  // and builds vscode's value types at load time), a no-op for anything else.
  const stubClasses = new Map<string, unknown>();
  fake.exports = new Proxy(vscode, {
    get(target, property, receiver) {
      if (property in target) return Reflect.get(target, property, receiver);
      if (typeof property !== 'string' || property === 'then' || property === '__esModule') return undefined;
      if (!/^[A-Z]/.test(property)) return disposable;
      if (!stubClasses.has(property)) stubClasses.set(property, class {});
      return stubClasses.get(property);
    },
  });
  require.cache[FAKE_ID] = fake;
  return host;
}
