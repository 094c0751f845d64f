/**
 * The extension in a real VS Code: code-server 4.100.3 with the built .vsix, driven in
 * Debian's Chromium through Playwright, against this checkout's terminal-registry
 * server. The tests run in order on one window, each starting where the last one left
 * the workbench; the last one stops code-server and fails on any process of the run
 * that outlives it and on any error in the extension host's or the extension's log.
 *
 * `npm run test:e2e` runs it; `npm run screenshots` also copies the pictures the docs
 * show into docs/images/.
 */

import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, test } from 'node:test';
import { Browser, chromium } from 'playwright-core';
import { CODE_SERVER_VERSION, CodeServer, createProfile, ensureCodeServer, taggedProcesses, waitUntilGone } from './codeServer';
import { serverCommand, vsixPath } from './project';
import { RESULTS_DIR, SCREENSHOTS_DIR } from './results';
import { VIEW_NAME, Workbench } from './workbench';

const T = { timeout: 60000 };
const log = (line: string) => process.stderr.write(`[e2e] ${line}\n`);

/** Debian's chromium package: the browser binary itself (/usr/bin/chromium is a wrapper script). */
function chromiumPath(): string {
  const candidates = [process.env.CHROMIUM_PATH, '/usr/lib/chromium/chromium', '/usr/bin/chromium'];
  const found = candidates.find((file): file is string => !!file && fs.existsSync(file));
  if (!found) throw new Error('Chromium is missing: apt-get install chromium (or set CHROMIUM_PATH)');
  return found;
}

let codeServer: CodeServer;
let browser: Browser | undefined;
let wb: Workbench;
let server: string[];
let webapp: string;
let api: string;

before(async () => {
  const started = Date.now();
  // What is missing is said before the long install, not after it.
  const executablePath = chromiumPath();
  server = serverCommand();
  log(`server: ${server.join(' ')}`);
  const vsix = vsixPath();
  const entry = await ensureCodeServer(log);
  log(`code-server ${CODE_SERVER_VERSION} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  fs.rmSync(RESULTS_DIR, { recursive: true, force: true });
  const profile = createProfile({
    root: fs.mkdtempSync(path.join(os.tmpdir(), 'terminal-registry-e2e-')),
    folders: ['webapp', 'api'],
    settings: {
      'terminalRegistry.server.command': server,
      // Fresh output cools down within a second, so rows settle on their idle icon soon.
      'terminalRegistry.server.initializationOptions': { hotTimeoutMs: 1000, killGraceMs: 500 },
      // Text in the DOM, where the test can read it (the GPU renderer draws on a canvas).
      'terminal.integrated.gpuAcceleration': 'off',
      'workbench.startupEditor': 'none',
      'workbench.tips.enabled': false,
      'security.workspace.trust.enabled': false,
      'telemetry.telemetryLevel': 'off',
      'extensions.autoCheckUpdates': false,
      'extensions.autoUpdate': false,
      'extensions.ignoreRecommendations': true,
      'update.mode': 'none',
      'git.enabled': false,
      'editor.minimap.enabled': false,
    },
  });
  [webapp, api] = profile.folders;
  codeServer = new CodeServer(entry, profile, log);
  await codeServer.installExtension(vsix);
  const url = await codeServer.start();
  log(`code-server on ${url}, profile in ${profile.root}, run tag ${codeServer.tag}`);
  browser = await chromium.launch({
    executablePath,
    headless: true,
    // Its crash-report and settings folders go into the run's home, not the user's.
    env: { ...process.env, HOME: profile.home },
    // As root Chromium needs --no-sandbox. Without the background-networking flags it
    // keeps trying hosts this machine cannot reach.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 760 } });
  const page = await context.newPage();
  page.setDefaultTimeout(20000);
  wb = new Workbench(page, SCREENSHOTS_DIR);
  await page.goto(`${url}/?workspace=${encodeURIComponent(profile.workspaceFile)}`);
  await wb.waitForStartup();
  // Wide enough for a terminal's cwd and command in the view.
  await wb.setSideBarWidth(440);
  log(`workbench up ${((Date.now() - started) / 1000).toFixed(1)} s after the start`);
}, { timeout: 20 * 60 * 1000 });

after(async () => {
  // Whatever happened above, nothing of the run stays behind; the logs stay in e2e-results/.
  await browser?.close().catch(() => undefined);
  if (!codeServer) return;
  await codeServer.stop().catch(() => undefined);
  const logs = path.join(codeServer.profile.userDataDir, 'logs');
  if (fs.existsSync(logs)) fs.cpSync(logs, path.join(RESULTS_DIR, 'logs'), { recursive: true });
  fs.writeFileSync(path.join(RESULTS_DIR, 'code-server.log'), codeServer.stdout);
  fs.rmSync(codeServer.profile.root, { recursive: true, force: true });
});

/** Resolves once `check` holds; for what only shows in files (logs) or /proc. */
async function until(check: () => boolean, what: string, timeoutMs = 20000): Promise<void> {
  const left = await waitUntilGone(() => (check() ? [] : [what]), timeoutMs);
  if (left.length > 0) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** "Run Command in a Task Terminal" from the view's title bar, answering its three questions. */
async function runFromView(taskId: string, cwd: string, commandLine: string): Promise<void> {
  await wb.viewAction('Run Command in a Task Terminal');
  await wb.answerInput(/\(1\/3\)/, taskId);
  await wb.answerInput(/\(2\/3\)/, cwd);
  await wb.answerInput(/\(3\/3\)/, commandLine);
}

/**
 * A test of the run. Each starts where the one before left the workbench, so after a
 * failure the rest are skipped (their timeouts would only add noise), but for those
 * marked `always` (the final checks). On failure it saves a screenshot of the workbench
 * as it was (e2e-results/screenshots/failed-*.png) before reporting.
 */
let firstFailure: string | undefined;
function e2eTest(
  name: string,
  options: { timeout?: number; skip?: string; always?: boolean },
  body: () => Promise<void>,
): void {
  const { always, ...testOptions } = options;
  test(name, testOptions, async (t) => {
    if (firstFailure !== undefined && !always) {
      t.skip(`after the failure of "${firstFailure}"`);
      return;
    }
    try {
      await body();
    } catch (error) {
      firstFailure ??= name;
      const shot = `failed-${name.replace(/[^a-z0-9]+/gi, '-').slice(0, 60)}`;
      if (wb && !wb.page.isClosed()) await wb.screenshot(shot).catch(() => undefined);
      throw error;
    }
  });
}

const home = (file: string) => `~/${path.relative(codeServer.profile.home, file)}`;

e2eTest('the view appears in the Explorer, and opening it activates the extension and starts the server', T, async () => {
  await wb.paneHeader(VIEW_NAME).waitFor();
  assert.doesNotMatch(codeServer.extensionHostLog(), /_doActivateExtension terminal-registry\./, 'nothing activates it before the view opens');
  // Room for the view: the folders' pane is not what this test looks at.
  await wb.setPaneExpanded('demo (Workspace)', false);
  await wb.setPaneExpanded(VIEW_NAME, true);
  await until(
    () => /_doActivateExtension terminal-registry\.terminal-registry.*activationEvent: 'onView:terminalRegistry\.terminals'/.test(codeServer.extensionHostLog()),
    'the extension to activate on its view',
  );
  await until(
    () => codeServer.outputChannel('Terminal Registry').includes(`starting ${server.join(' ')} serve --stdio`),
    'the extension to start the server',
  );
  // "Starting terminal-registry…" goes once the server answered; then the welcome text shows.
  await wb.registryPane().locator('.message.hide').waitFor({ state: 'attached' });
  await wb.registryPane().getByText('No registry terminals yet.').waitFor();
});

e2eTest('Run Command in a Task Terminal, twice: two tasks in two folders, both groups with their icons and results', T, async () => {
  await wb.viewAction('Run Command in a Task Terminal');
  await wb.answerInput(/\(1\/3\)/, 'build-web');
  assert.equal(await wb.proposedInput(/\(2\/3\)/), webapp, 'the working directory proposed is the first folder');
  await wb.answerInput(/\(2\/3\)/, webapp);
  await wb.answerInput(/\(3\/3\)/, 'echo built-$((6*7))');
  await wb.waitForNotification(`echo built-$((6*7)): exit code 0 (completed), cwd ${webapp}`);
  await wb.hideNotifications();

  await runFromView('test-api', api, 'echo tests-passed-$((3*4))');
  const result = await wb.waitForNotification(`echo tests-passed-$((3*4)): exit code 0 (completed), cwd ${api}`);

  // Fresh output shows a flame; both settle on the idle icon once it cools down.
  await wb.waitForRows([
    [1, 'checklist', 'build-web', '1 terminal'],
    [2, 'terminal', '1: bash', `${home(webapp)} · echo built-$((6*7))`],
    [1, 'checklist', 'test-api', '1 terminal'],
    [2, 'terminal', '2: bash', `${home(api)} · echo tests-passed-$((3*4))`],
  ]);
  const rows = await wb.rows();
  assert.match(rows[1].ariaLabel, /^Terminal 1 \(shell, .*bash, pid \d+\)\nTask: build-web\nState: idle\n/);
  // "Show Output" on the result: the runs' output channel, with each command's output and exit code.
  await result.getByRole('button', { name: 'Show Output' }).click();
  await wb.hideNotifications();
  await wb.page.locator('.part.panel .view-lines', { hasText: 'tests-passed-12' }).waitFor();
  assert.match(codeServer.outputChannel('Terminal Registry Runs'), /\nbuilt-42\n\[exit code 0 · completed · cwd [^\n]*\/webapp ·/);
  await wb.screenshot('view-two-tasks');
});

e2eTest('Show opens a mirror of the terminal with its output replayed', T, async () => {
  await wb.rowAction(wb.terminalRowOfTask('build-web'), 'Show Terminal');
  await wb.page.getByText('Registry 1: build-web').first().waitFor();
  // The command ran before the mirror existed: what shows is the replay.
  await wb.waitForTerminalText('built-42');
  await wb.waitForTerminalText(`${home(webapp)}#`);
});

e2eTest('typing into the mirror runs the command in the registry terminal', T, async () => {
  await wb.typeInTerminal('echo typed-$((2+3))');
  await wb.waitForTerminalText('typed-5');
  // The registry's shell ran it: the row shows it as the terminal's last command.
  await wb.terminalRowOfTask('build-web').filter({ hasText: 'echo typed-$((2+3))' }).waitFor();
  await wb.screenshot('mirror');
});

e2eTest('Show Environment Details opens a readable, read-only report', T, async () => {
  // The typed command's output was never retrieved: the report has it.
  await wb.viewAction('Show Environment Details');
  await wb.answerInput(/^Show Environment Details$/, 'build-web');
  await wb.webviewBody('typed-5');
  const tabs = await wb.tabs();
  assert.deepEqual(
    tabs.filter((tab) => tab.active).map((tab) => tab.label),
    ['Preview Environment details (build-web).md'],
  );
  assert.deepEqual(tabs.filter((tab) => tab.dirty || /^Untitled/.test(tab.label)), [], 'no unsaved tab');
  await wb.screenshot('environment-details');
  // Nothing asks to be saved on close.
  await wb.runCommand('View: Close All Editors');
  await wb.page.locator('.tabs-container .tab').first().waitFor({ state: 'detached' });
  assert.equal(await wb.page.locator('.monaco-dialog-box').count(), 0);
});

e2eTest(
  'Show Environment Details puts command output in fenced code blocks',
  T,
  async () => {
    await wb.typeInTerminal("printf '# not a heading\\n*not emphasis*\\n'");
    await wb.waitForTerminalText('*not emphasis*');
    await wb.viewAction('Show Environment Details');
    await wb.answerInput(/^Show Environment Details$/, 'build-web');
    const body = await wb.webviewBody('not a heading');
    // Output is code, line for line: no heading, no emphasis, no run-together paragraph.
    assert.equal(await body.locator('pre code', { hasText: '# not a heading\n*not emphasis*' }).count(), 1, 'the output in a code block');
    assert.equal(await body.locator('h1', { hasText: 'not a heading' }).count(), 0, 'no heading made of output');
    await wb.runCommand('View: Close All Editors');
  },
);

e2eTest('a busy sleep is killed from its row\'s inline action', T, async () => {
  await runFromView('test-api', api, 'sleep 600');
  const row = wb.terminalRowOfTask('test-api');
  await wb.waitForIcon(row, 'sync~spin');
  await wb.waitForNotification('Running sleep 600');
  await wb.hideNotifications();
  const sleeping = () => taggedProcesses(codeServer.tag).filter((p) => p.command === 'sleep 600');
  await until(() => sleeping().length === 1, 'the sleep to run');
  await wb.rowAction(row, 'Kill Running Command');
  await wb.waitForNotification(`sleep 600: exit code 130 (cancelled), cwd ${api}`);
  await wb.hideNotifications();
  await wb.waitForIcon(row, 'terminal');
  assert.deepEqual(await waitUntilGone(sleeping, 10000), [], 'the sleep has ended');
});

e2eTest(
  'a finished terminal never shows busy again after its result',
  T,
  async () => {
    // Record every spinner the view draws, and when the result appears.
    await wb.page.evaluate(() => {
      const record: { spinner: number[]; result: number } = { spinner: [], result: Infinity };
      (window as unknown as { busyRecord: typeof record }).busyRecord = record;
      new MutationObserver(() => {
        if (document.querySelector('.custom-view-tree-node-item-icon.codicon-modifier-spin')) record.spinner.push(performance.now());
        const listed = [...document.querySelectorAll('.notification-toast, .notifications-center .monaco-list-row')];
        if (record.result === Infinity && listed.some((item) => item.textContent?.includes('flicker-done: exit code'))) {
          record.result = performance.now();
        }
      }).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    });
    await runFromView('build-web', webapp, 'sleep 0.5; echo flicker-done');
    await wb.waitForNotification(/flicker-done: exit code 0/);
    await wb.hideNotifications();
    // The row cools down to idle: by then any late busy would have been drawn.
    await wb.waitForIcon(wb.terminalRowOfTask('build-web'), 'terminal');
    const record = await wb.page.evaluate(() => (window as unknown as { busyRecord: { spinner: number[]; result: number } }).busyRecord);
    assert.ok(record.spinner.length > 0, 'the spinner showed while the command ran');
    assert.deepEqual(record.spinner.filter((t) => t > record.result), [], 'no spinner after the result');
  },
);

e2eTest(
  'a command waiting for input shows its state and prompt in the view',
  T,
  async () => {
    // The prompt is built at run time, so that it is not in the command line the row also shows.
    await runFromView('ask', webapp, 'read -r -p "$(echo Your name)? " name && echo hello-$name');
    const row = wb.terminalRowOfTask('ask');
    // The row says the command waits, and for what.
    await row.filter({ hasText: 'Your name?' }).waitFor();
    assert.match((await wb.rows()).find((r) => r.ariaLabel.includes('Task: ask'))?.ariaLabel ?? '', /waiting/i);
    // Answered through the mirror, the command ends. (The "Running" toast would
    // cover the terminal: into the center with it, and the center closed.)
    await wb.waitForNotification(/Running read/);
    await wb.hideNotifications();
    await wb.rowAction(row, 'Show Terminal');
    await wb.typeInTerminal('e2e');
    await wb.waitForNotification(/echo hello-\$name: exit code 0/);
    await wb.hideNotifications();
  },
);

e2eTest('Restart Server empties the view, and it fills again from the new server', T, async () => {
  await wb.viewAction('Restart Server');
  await wb.waitForEmptyView();
  // The old server's terminals are gone, and the mirror says why it stopped following.
  await wb.waitForTerminalText('server stopped');
  await wb.registryPane().getByText('No registry terminals yet.').waitFor();
  await until(
    () => /Server process exited with code 0, as asked\./.test(codeServer.outputChannel('Terminal Registry')),
    'the old server to exit',
  );
  await runFromView('build-web', webapp, 'echo after-restart');
  await wb.waitForNotification('echo after-restart: exit code 0 (completed)');
  await wb.hideNotifications();
  await wb.waitForRows([
    [1, 'checklist', 'build-web', '1 terminal'],
    // Ids start over with the new server.
    [2, 'terminal', '1: bash', `${home(webapp)} · echo after-restart`],
  ]);
});

e2eTest('closing the window ends the extension and its server; code-server leaves no process behind; no error was logged', { timeout: 90000, always: true }, async () => {
  // The workbench tells its extension host to terminate: the extension deactivates and
  // stops the server, which ends its terminals.
  await wb.page.close({ runBeforeUnload: true });
  const extensionHosts = () => taggedProcesses(codeServer.tag).filter((p) => p.command.includes('--type=extensionHost'));
  assert.deepEqual(await waitUntilGone(extensionHosts, 20000), [], 'the extension host outlived its window');
  await browser?.close();
  browser = undefined;
  const survivors = await codeServer.stop();
  assert.deepEqual(survivors, [], 'processes of the run that outlived code-server (killed now)');
  assert.deepEqual(codeServer.extensionHostErrors(), [], 'errors in the extension host log');
  const channel = codeServer.outputChannel('Terminal Registry');
  const errors = channel.split('\n').filter((line) => /^\[Error|Traceback|^ERROR/.test(line));
  assert.deepEqual(errors, [], `errors in the Terminal Registry output channel:\n${channel}`);
});
