/** Where a run of the end-to-end test leaves its screenshots and logs, and which pictures the docs show. */

import * as path from 'node:path';
import { CLIENT_DIR, REPO_ROOT } from './project';

export const RESULTS_DIR = process.env.TERMINAL_REGISTRY_E2E_RESULTS ?? path.join(CLIENT_DIR, 'e2e-results');
export const SCREENSHOTS_DIR = path.join(RESULTS_DIR, 'screenshots');
export const DOCS_IMAGES_DIR = path.join(REPO_ROOT, 'docs', 'images');

/** The screenshots docs/vscode-extension.md and README.md show: the test's name → the docs' file. */
export const DOCS_SCREENSHOTS: Readonly<Record<string, string>> = {
  'view-two-tasks': 'vscode-view.png',
  mirror: 'vscode-mirror.png',
  'environment-details': 'vscode-environment-details.png',
};
