/**
 * The VS Code workbench in the browser, as the test sees it: the Terminal Registry
 * view and its rows, quick inputs, notifications, editor tabs, the terminal panel and
 * webviews. Selectors are VS Code's own DOM (code-server 4.100.3, VS Code 1.100);
 * every wait is Playwright's (on the DOM), bounded by its timeout.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Locator, Page } from 'playwright-core';

export const VIEW_NAME = 'Terminal Registry';

/** One row of the Terminal Registry tree, as drawn. */
export interface Row {
  /** 1: a task group, 2: a terminal. */
  level: number;
  label: string;
  description: string;
  /** The codicon id, e.g. `terminal`, `flame`, `checklist`, `sync~spin`. */
  icon: string;
  /** The accessible label: for a terminal, its tooltip (task, state, cwd, ...). */
  ariaLabel: string;
}

export interface Tab {
  label: string;
  dirty: boolean;
  active: boolean;
}

export class Workbench {
  constructor(
    readonly page: Page,
    private readonly screenshotsDir: string,
  ) {}

  async waitForStartup(): Promise<void> {
    await this.page.locator('.monaco-workbench').waitFor({ timeout: 60000 });
    await this.paneHeader(VIEW_NAME).waitFor({ timeout: 60000 });
  }

  /** Drags the sash between the side bar and the editors until the side bar is `width` wide. */
  async setSideBarWidth(width: number): Promise<void> {
    const box = await this.page.locator('.part.sidebar').boundingBox();
    if (!box) throw new Error('no side bar');
    const y = box.y + box.height / 2;
    await this.page.mouse.move(box.x + box.width, y);
    await this.page.mouse.down();
    await this.page.mouse.move(box.x + width, y, { steps: 5 });
    await this.page.mouse.up();
  }

  // -- the Explorer's panes --------------------------------------------------------------

  /** The header of the Explorer pane titled `name` (shown in capitals, matched in any case). */
  paneHeader(name: string): Locator {
    const title = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'i');
    return this.page.locator('.pane-header', { has: this.page.locator('h3.title', { hasText: title }) });
  }

  registryPane(): Locator {
    return this.page.locator('.pane', { has: this.paneHeader(VIEW_NAME) });
  }

  async setPaneExpanded(name: string, expanded: boolean): Promise<void> {
    const header = this.paneHeader(name);
    if ((await header.getAttribute('aria-expanded')) !== String(expanded)) await header.click();
    await header.and(this.page.locator(`[aria-expanded="${expanded}"]`)).waitFor();
  }

  /** Clicks one of the view's title actions (shown on hover). */
  async viewAction(title: string): Promise<void> {
    const header = this.paneHeader(VIEW_NAME);
    await header.hover();
    await header.getByRole('button', { name: title, exact: true }).click();
  }

  // -- the tree -------------------------------------------------------------------------

  async rows(): Promise<Row[]> {
    return this.page.evaluate(viewRows, VIEW_NAME);
  }

  /**
   * Resolves once the view's rows are `expected` (level, icon, label, description), as
   * they settle: a row passes through busy and hot before it is idle.
   */
  async waitForRows(expected: [number, string, string, string][], timeout = 20000): Promise<void> {
    // As an expression: the predicate calls viewRows, which a serialised function could not.
    const shown = `(${viewRows.toString()})(${JSON.stringify(VIEW_NAME)}).map((r) => [r.level, r.icon, r.label, r.description])`;
    try {
      await this.page.waitForFunction(`JSON.stringify(${shown}) === ${JSON.stringify(JSON.stringify(expected))}`, undefined, { timeout });
    } catch (error) {
      const rows = (await this.rows()).map((r) => [r.level, r.icon, r.label, r.description]);
      throw new Error(`the view shows ${JSON.stringify(rows)}, not ${JSON.stringify(expected)} (${error})`);
    }
  }

  /** The row of the terminal that belongs to `taskId` (its tooltip, the accessible label, names the task). */
  terminalRowOfTask(taskId: string): Locator {
    return this.registryPane().locator(`[role=treeitem][aria-level="2"][aria-label*=${cssString(`\nTask: ${taskId}\n`)}]`);
  }

  /** Resolves once the row's icon is `icon` (`sync~spin`: the spinner). */
  async waitForIcon(row: Locator, icon: string, timeout = 20000): Promise<void> {
    const [name, modifier] = icon.split('~');
    const selector = `.custom-view-tree-node-item-icon.codicon-${name}${modifier ? `.codicon-modifier-${modifier}` : ''}`;
    await row.locator(selector).waitFor({ timeout });
  }

  /** Resolves once the view shows no rows (its welcome text instead). */
  async waitForEmptyView(timeout = 20000): Promise<void> {
    await this.registryPane().locator('[role=treeitem]').first().waitFor({ state: 'detached', timeout });
  }

  /** Clicks an inline action of a row (shown on hover). */
  async rowAction(row: Locator, title: string): Promise<void> {
    await row.hover();
    await row.getByRole('button', { name: title, exact: true }).click();
  }

  // -- quick input, notifications, commands -----------------------------------------------

  /**
   * Answers the input box titled `title`, replacing its proposed value, and resolves once
   * the box has taken the answer. VS Code accepts only after the extension validated
   * the value: a key pressed before then (F1, say) would replace the box and cancel it.
   */
  async answerInput(title: RegExp, value: string): Promise<void> {
    const widget = this.page.locator('.quick-input-widget', { has: this.page.locator('.quick-input-title', { hasText: title }) });
    await widget.waitFor();
    const input = widget.locator('input.input');
    await input.fill(value);
    await input.press('Enter');
    await widget.waitFor({ state: 'hidden' });
  }

  async proposedInput(title: RegExp): Promise<string> {
    const widget = this.page.locator('.quick-input-widget', { has: this.page.locator('.quick-input-title', { hasText: title }) });
    await widget.waitFor();
    return widget.locator('input.input').inputValue();
  }

  /**
   * Resolves once a notification holding `text` is listed, and returns its entry in the
   * notification center (left open: call hideNotifications()). Toasts cannot be relied
   * on: VS Code shows at most 3 new ones per 800 ms and drops the rest from view (they
   * stay in the center), which two quick runs (progress and result each) exceed.
   */
  async waitForNotification(text: RegExp | string, timeout = 20000): Promise<Locator> {
    const center = this.page.locator('.notifications-center.visible');
    if ((await center.count()) === 0) await this.runCommand('Notifications: Show Notifications');
    const item = center.locator('.notifications-list-container .monaco-list-row', { hasText: text });
    const deadline = Date.now() + timeout;
    for (;;) {
      try {
        await item.first().waitFor({ timeout: Math.max(1, Math.min(2000, deadline - Date.now())) });
        return item.first();
      } catch (error) {
        if (Date.now() >= deadline) throw error;
      }
      // The newest is listed first, but only rows in view exist (the list is virtual),
      // and one that arrived after the center opened sits above the focused row, out
      // of view: back to the top of the list.
      await center.locator('.monaco-list').first().focus();
      await this.page.keyboard.press('Home');
    }
  }

  async hideNotifications(): Promise<void> {
    if ((await this.page.locator('.notifications-center.visible').count()) === 0) return;
    await this.runCommand('Notifications: Hide Notifications');
    await this.page.locator('.notifications-center.visible').waitFor({ state: 'detached' });
  }

  /** Runs a command from the command palette by its full title. */
  async runCommand(title: string): Promise<void> {
    await this.page.keyboard.press('F1');
    const input = this.page.locator('.quick-input-widget input.input');
    await input.waitFor();
    await input.fill(`>${title}`);
    await this.page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor();
    await input.press('Enter');
  }

  // -- editors and webviews ----------------------------------------------------------------

  async tabs(): Promise<Tab[]> {
    return this.page.locator('.tabs-container .tab').evaluateAll((tabs) =>
      tabs.map((tab) => ({
        label: tab.querySelector('.label-name')?.textContent ?? tab.getAttribute('aria-label') ?? '',
        dirty: tab.classList.contains('dirty'),
        active: tab.classList.contains('active'),
      })),
    );
  }

  /**
   * The body of the visible webview (a markdown preview, for one) once it holds `text`.
   * A webview is an iframe whose document loads the content into a nested one.
   */
  async webviewBody(text: string | RegExp, timeout = 20000): Promise<Locator> {
    const body = this.page
      .locator('.webview.ready')
      .last()
      .contentFrame()
      .locator('iframe#active-frame')
      .contentFrame()
      .locator('body', { hasText: text });
    await body.waitFor({ timeout });
    return body;
  }

  // -- the terminal panel --------------------------------------------------------------------

  /** Resolves once the active terminal shows `text` (drawn in the DOM: terminal.integrated.gpuAcceleration off). */
  async waitForTerminalText(text: string, timeout = 20000): Promise<void> {
    await this.page.locator('.terminal-wrapper.active .xterm-rows', { hasText: text }).waitFor({ timeout });
  }

  async typeInTerminal(line: string): Promise<void> {
    await this.page.locator('.terminal-wrapper.active .xterm').click();
    await this.page.keyboard.type(line);
    await this.page.keyboard.press('Enter');
  }

  // -- screenshots -------------------------------------------------------------------------

  async screenshot(name: string): Promise<string> {
    fs.mkdirSync(this.screenshotsDir, { recursive: true });
    const file = path.join(this.screenshotsDir, `${name}.png`);
    // The caret blinks and hover tooltips come and go: leave them out of the picture.
    await this.page.mouse.move(0, 0);
    await this.page.screenshot({ path: file, caret: 'hide', animations: 'disabled' });
    return file;
  }
}

/** A CSS string literal for `text` (newlines and quotes escaped). */
function cssString(text: string): string {
  return `"${text.replace(/["\\]/g, (c) => `\\${c}`).replace(/\n/g, '\\a ')}"`;
}

/** The rows of the view named `viewName` as drawn (runs in the page). */
function viewRows(viewName: string): Row[] {
  const pane = [...document.querySelectorAll('.pane')].find(
    (candidate) => candidate.querySelector('.pane-header h3.title')?.textContent?.trim().toLowerCase() === viewName.toLowerCase(),
  );
  return [...(pane?.querySelectorAll('[role=treeitem]') ?? [])].map((item) => {
    const icon = item.querySelector('.custom-view-tree-node-item-icon');
    const classes = icon ? [...icon.classList] : [];
    const name = classes.find((c) => c.startsWith('codicon-') && !c.startsWith('codicon-modifier-'))?.slice(8) ?? '';
    const modifier = classes.find((c) => c.startsWith('codicon-modifier-'))?.slice(17);
    return {
      level: Number(item.getAttribute('aria-level')),
      label: item.querySelector('.label-name')?.textContent ?? '',
      description: item.querySelector('.label-description')?.textContent ?? '',
      icon: modifier ? `${name}~${modifier}` : name,
      ariaLabel: item.getAttribute('aria-label') ?? '',
    };
  });
}
