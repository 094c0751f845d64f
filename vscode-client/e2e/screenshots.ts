/**
 * `npm run screenshots`: after a green `npm run test:e2e`, copies the screenshots the
 * docs show from e2e-results/ into docs/images/. The pictures are never edited by hand.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';
import { DOCS_IMAGES_DIR, DOCS_SCREENSHOTS, SCREENSHOTS_DIR } from './results';

fs.mkdirSync(DOCS_IMAGES_DIR, { recursive: true });
for (const [shot, image] of Object.entries(DOCS_SCREENSHOTS)) {
  const source = path.join(SCREENSHOTS_DIR, `${shot}.png`);
  if (!fs.existsSync(source)) throw new Error(`${source} is missing: did npm run test:e2e pass?`);
  fs.copyFileSync(source, path.join(DOCS_IMAGES_DIR, image));
  process.stdout.write(`${path.relative(process.cwd(), path.join(DOCS_IMAGES_DIR, image))}\n`);
}
