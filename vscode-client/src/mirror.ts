/**
 * The mirror of one registry terminal: what a VS Code terminal shows and types into.
 *
 * Ordering is the whole point. The mirror subscribes to `terminal/didWrite` first,
 * then asks for `terminal/replay`. The server sends every didWrite still gathering
 * before answering the replay, so everything that arrives before the answer is
 * already inside it (dropped), and everything after it is new (appended): the screen
 * gets every byte exactly once. Notifications and answers come in stream order and a
 * message is handled only after the previous one's promise continuations ran, so the
 * switch to `live` happens before the next didWrite is looked at.
 *
 * Closing the mirror stops listening; the registry terminal lives on. No `vscode` import:
 * src/pty.ts adapts this to a vscode.Pseudoterminal.
 */

import type { TerminalRegistryClient } from './client';
import type { Disposable } from './events';

export type MirrorState = 'new' | 'opening' | 'live' | 'closed';

/** How much recent output to repaint from (the server keeps 256 KiB by default). */
export const DEFAULT_REPLAY_BYTES = 256 * 1024;

export interface MirrorCallbacks {
  /** Text for the screen: raw output with escapes, and the mirror's own notices. */
  onData(text: string): void;
  /** The mirror ended from the registry's side (terminal closed, server gone). */
  onClose(): void;
}

export interface MirrorOptions {
  maxBytes?: number;
}

/** Clear the screen and the scrollback, cursor home: before a repaint. */
export const REPAINT = '\x1b[H\x1b[2J\x1b[3J';

/** A notice in the mirror's own voice, on a line of its own, dimmed. */
export function notice(text: string): string {
  return `\r\n\x1b[2m[terminal-registry] ${text}\x1b[0m\r\n`;
}

export class TerminalMirror implements Disposable {
  private stateValue: MirrorState = 'new';
  private subscriptions: Disposable[] = [];
  /** Input errors already shown, so a terminal without stdin does not flood the screen. */
  private readonly shownErrors = new Set<string>();

  constructor(
    private readonly client: TerminalRegistryClient,
    readonly terminalId: number,
    private readonly callbacks: MirrorCallbacks,
    private readonly options: MirrorOptions = {},
  ) {}

  get state(): MirrorState {
    return this.stateValue;
  }

  /** Subscribe, then repaint from the replay; resolves once live (or closed). */
  async open(dimensions?: { cols: number; rows: number }): Promise<void> {
    if (this.stateValue !== 'new') return;
    this.stateValue = 'opening';
    // Subscribe FIRST: output between the replay's snapshot and its answer must not
    // fall in a gap (see the module comment for why nothing is doubled either).
    this.subscriptions.push(
      this.client.onDidWrite(({ terminalId, data, missed }) => {
        if (terminalId !== this.terminalId || this.stateValue !== 'live') return;
        // The server held output back while we were not reading: what is on screen
        // has a gap. Repaint from a fresh replay (which holds this data too).
        if (missed) void this.paintFromReplay(REPAINT, 'cannot repaint');
        else this.callbacks.onData(data);
      }),
      this.client.onDidClose(({ terminalId }) => {
        if (terminalId === this.terminalId) this.end('the registry terminal closed');
      }),
    );
    if (dimensions) this.resize(dimensions.cols, dimensions.rows);
    await this.paintFromReplay('', 'cannot mirror');
  }

  /**
   * Paint `prefix` and the replay, then go live. didWrites that arrive before the
   * answer are inside it (dropped while 'opening'); later ones are appended. Used to
   * open, and to repaint (prefix: clear screen and scrollback) after missed output.
   */
  private async paintFromReplay(prefix: string, failure: string): Promise<void> {
    this.stateValue = 'opening';
    let replay: string;
    try {
      replay = await this.client.replay(this.terminalId, this.options.maxBytes ?? DEFAULT_REPLAY_BYTES);
    } catch (error) {
      this.end(`${failure} terminal ${this.terminalId}: ${errorMessage(error)}`);
      return;
    }
    if (this.stateValue !== 'opening') return; // closed or disposed meanwhile
    this.stateValue = 'live';
    if (prefix || replay) this.callbacks.onData(prefix + replay);
  }

  /** Keyboard input, raw: forwarded to `terminal/write`. */
  write(data: string): void {
    if (this.stateValue === 'closed' || this.stateValue === 'new') return;
    this.client.write(this.terminalId, data).catch((error: unknown) => {
      const message = errorMessage(error);
      if (this.stateValue === 'closed' || this.shownErrors.has(message)) return;
      this.shownErrors.add(message);
      this.callbacks.onData(notice(`input not delivered: ${message}`));
    });
  }

  /** The view's size changed: the registry's PTY follows, so full-screen programs fit. */
  resize(cols: number, rows: number): void {
    if (this.stateValue === 'closed' || cols < 1 || rows < 1) return;
    // A terminal closing under us answers an error; the didClose notice says it all.
    this.client.resize(this.terminalId, cols, rows).catch(() => undefined);
  }

  /** The connection to the server is gone (it stopped or restarted). */
  detach(reason: string): void {
    this.end(reason);
  }

  /** Stop mirroring; the registry terminal is left alone. */
  dispose(): void {
    this.unsubscribe();
    this.stateValue = 'closed';
  }

  private end(reason: string): void {
    if (this.stateValue === 'closed') return;
    this.unsubscribe();
    this.stateValue = 'closed';
    this.callbacks.onData(notice(reason));
    this.callbacks.onClose();
  }

  private unsubscribe(): void {
    for (const subscription of this.subscriptions.splice(0)) subscription.dispose();
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
