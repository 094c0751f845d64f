/**
 * A vscode.Pseudoterminal that shows a registry terminal: the adapter around
 * src/mirror.ts, which holds all of the logic (and is tested without VS Code).
 */

import * as vscode from 'vscode';
import type { TerminalRegistryClient } from './client';
import { TerminalMirror } from './mirror';

export class MirrorPseudoterminal implements vscode.Pseudoterminal {
  private readonly writeEmitter = new vscode.EventEmitter<string>();
  readonly onDidWrite: vscode.Event<string> = this.writeEmitter.event;
  readonly mirror: TerminalMirror;

  /**
   * @param onEnded called when the registry terminal closed or the server went away; the
   *   VS Code terminal stays open, showing why, until the user closes it.
   */
  constructor(client: TerminalRegistryClient, terminalId: number, onEnded?: () => void) {
    this.mirror = new TerminalMirror(client, terminalId, {
      onData: (text) => this.writeEmitter.fire(text),
      onClose: () => onEnded?.(),
    });
  }

  open(initialDimensions: vscode.TerminalDimensions | undefined): void {
    // VS Code drops onDidWrite events fired before open(), so the mirror starts here.
    const size = initialDimensions ? { cols: initialDimensions.columns, rows: initialDimensions.rows } : undefined;
    void this.mirror.open(size);
  }

  /** The user closed the VS Code terminal: stop mirroring, leave the registry terminal alone. */
  close(): void {
    this.mirror.dispose();
    this.writeEmitter.dispose();
  }

  handleInput(data: string): void {
    this.mirror.write(data);
  }

  setDimensions(dimensions: vscode.TerminalDimensions): void {
    this.mirror.resize(dimensions.columns, dimensions.rows);
  }
}
