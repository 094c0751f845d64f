/** The bundle in a fake extension host whose server command does not exist: it says so. */

import assert from 'node:assert/strict';
import * as path from 'node:path';
import { test } from 'node:test';
import type { TerminalRegistryApi } from '../src/api';
import { installFakeVscodeHost } from './helpers/fakeVscodeHost';
import { withTimeout } from './helpers/server';

test('a server that cannot start: an error message, the view says why, API calls reject', { timeout: 30000 }, async () => {
  const host = installFakeVscodeHost({
    config: { 'terminalRegistry.server.command': '/nonexistent/bin/terminal-registry' },
    workspaceFolders: [],
  });
  const failed = new Promise<string>((resolve) => {
    const sub = host.onMessage.event((text) => {
      if (text.includes('did not start')) {
        sub.dispose();
        resolve(text);
      }
    });
  });
  const extension = require(path.resolve(__dirname, '..', '..', 'dist', 'extension.js')) as {
    activate(context: unknown): TerminalRegistryApi;
    deactivate(): Promise<void>;
  };
  const api = extension.activate({ subscriptions: [] });
  const text = await withTimeout(failed, 20000, 'the error message');
  assert.match(text, /terminalRegistry\.server\.command/);
  assert.match(host.treeViews.get('terminalRegistry.terminals')?.message ?? '', /did not start/);
  await assert.rejects(api.run('true', { taskId: 't', cwd: '/' }));
  await extension.deactivate();
});
