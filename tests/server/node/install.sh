#!/usr/bin/env bash
# Installs the Node test packages (openai, puppeteer-core: no browser download) from the committed lock file into
# DEST, once per lock file. Only the npm registry is contacted; Chromium comes from Debian (scripts/setup.sh).
set -euo pipefail
src=$1
dest=$2
mkdir -p "$dest"
if [ -d "$dest/node_modules" ] && cmp -s "$src/package-lock.json" "$dest/installed-lock.json"; then
  exit 0
fi
cp "$src/package.json" "$src/package-lock.json" "$dest/"
cd "$dest"
PUPPETEER_SKIP_DOWNLOAD=1 npm install --no-audit --no-fund --no-update-notifier --loglevel=error
cp "$src/package-lock.json" "$dest/installed-lock.json"
