/**
 * The LanguageClient that runs `terminal-registry serve --stdio`: vscode-languageclient's
 * own, except that the server's clean exit after a stop we asked for is logged as what
 * it is (the expected end of a restart or deactivation), not as an error.
 */

import { LanguageClient, State } from 'vscode-languageclient/node';

/**
 * vscode-languageclient 9.0.1 (pinned in package.json) logs every exit of its server
 * process as an error, this one included, even right after `stop()` asked for it: its
 * `exit` listener cannot tell a requested end from a crash.
 */
export const CLEAN_EXIT_MESSAGE = 'Server process exited with code 0.';
const EXIT_MESSAGE_PREFIX = 'Server process exited with ';

export class RegistryLanguageClient extends LanguageClient {
  /** A stop of the running server was asked for and its process has not reported its exit yet. */
  private exitRequested = false;

  /** Also reached through `dispose()` and `restart()`. */
  override stop(timeout?: number): Promise<void> {
    // Only a running client shuts a live process down (stopping any other throws).
    if (this.state === State.Running) this.exitRequested = true;
    return super.stop(timeout);
  }

  override error(message: string, data?: unknown, showNotification?: boolean | 'force'): void {
    // The exit message arrives once per process, possibly after a restart() has started
    // the next one, so the flag is cleared by the message, not by start().
    if (this.exitRequested && message.startsWith(EXIT_MESSAGE_PREFIX)) {
      this.exitRequested = false;
      if (message === CLEAN_EXIT_MESSAGE) {
        this.info('Server process exited with code 0, as asked.', undefined, false);
        return;
      }
    }
    // A crash, a non-zero code, or a signal (the stop timed out and the process was killed).
    super.error(message, data, showNotification);
  }
}
