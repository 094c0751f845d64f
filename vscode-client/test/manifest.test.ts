/** package.json agrees with the code: commands, activation, menus, view, settings. */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';

const root = path.resolve(__dirname, '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const extensionSource = fs.readFileSync(path.join(root, 'src', 'extension.ts'), 'utf8');

test('every contributed command is registered, activates the extension, and vice versa', () => {
  const contributed: string[] = manifest.contributes.commands.map((c: { command: string }) => c.command).sort();
  const registered = [...extensionSource.matchAll(/command\('(terminalRegistry\.[A-Za-z]+)'/g)].map((m) => m[1]).sort();
  assert.deepEqual(registered, contributed);
  for (const command of contributed) assert.ok(manifest.activationEvents.includes(`onCommand:${command}`), command);
  assert.ok(manifest.activationEvents.includes('onView:terminalRegistry.terminals'));
  assert.deepEqual(
    manifest.contributes.views.explorer.map((v: { id: string }) => v.id),
    ['terminalRegistry.terminals'],
  );
});

test('item menus only show on terminal items of the view', () => {
  for (const item of manifest.contributes.menus['view/item/context']) {
    assert.match(item.when, /^view == terminalRegistry\.terminals && viewItem (==|=~) \/?\^?terminal/);
  }
});

test('the manifest fields a .vsix needs', () => {
  assert.equal(manifest.name, 'terminal-registry');
  assert.equal(manifest.publisher, 'terminal-registry');
  assert.equal(manifest.main, './dist/extension.js');
  assert.equal(manifest.engines.vscode, '^1.90.0');
  assert.equal(manifest.license, 'MIT');
  const settings = manifest.contributes.configuration.properties;
  assert.ok(settings['terminalRegistry.server.command']);
  assert.equal(settings['terminalRegistry.server.initializationOptions'].type, 'object');
});
