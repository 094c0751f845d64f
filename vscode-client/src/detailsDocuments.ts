/**
 * Environment details as read-only documents: one virtual markdown document per task
 * (`terminal-registry:/Environment details (TASK).md`), served from memory. An untitled
 * document would do as well for the preview, but it stays behind as an unsaved tab
 * that asks to be saved when closed.
 */

import * as vscode from 'vscode';

export const DETAILS_SCHEME = 'terminal-registry';

export class EnvironmentDetailsDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly changeEmitter = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange: vscode.Event<vscode.Uri> = this.changeEmitter.event;
  /** The latest report per document; one entry per task id asked about. */
  private readonly reports = new Map<string, string>();

  /** Stores the report for the task and returns its document's uri (the same for each task). */
  publish(taskId: string | undefined, markdown: string): vscode.Uri {
    const uri = detailsUri(taskId);
    const key = uri.toString();
    const known = this.reports.has(key);
    this.reports.set(key, markdown);
    // An open document (and its preview) shows the new report.
    if (known) this.changeEmitter.fire(uri);
    return uri;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.reports.get(uri.toString()) ?? '';
  }

  dispose(): void {
    this.changeEmitter.dispose();
    this.reports.clear();
  }
}

export function detailsUri(taskId: string | undefined): vscode.Uri {
  const name = taskId === undefined ? 'released terminals' : taskId;
  return vscode.Uri.from({ scheme: DETAILS_SCHEME, path: `/Environment details (${name}).md` });
}
