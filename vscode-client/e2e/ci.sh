#!/usr/bin/env bash
# CI step: the extension in a real VS Code (code-server) driven in Debian's Chromium.
# Installs what a fresh Debian machine lacks, then runs `npm run test:e2e`. The server
# it tests is this checkout's: .ci/run has installed it (pip install -e) before; the
# test checks that `python3` (or the active virtualenv's python) imports it from here.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

# chromium: the browser (Playwright drives it; it downloads none of its own).
# libkrb5-dev: code-server's install builds the kerberos module from source.
# ripgrep: code-server's @vscode/ripgrep takes Debian's rg instead of a download.
need=()
for package in chromium libkrb5-dev ripgrep; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || need+=("$package")
done
if [ "${#need[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "e2e/ci.sh: system packages ready after $((SECONDS - start)) s"

[ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund
npm run test:e2e
echo "e2e/ci.sh: done in $((SECONDS - start)) s"
