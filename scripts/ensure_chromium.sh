#!/usr/bin/env bash
# The console's browser tests drive Debian's Chromium (/usr/bin/chromium, or CHROMIUM_PATH).
# Install it when missing; if that is not possible here (no root, no apt), say so: those
# tests then skip and say why.
set -uo pipefail
CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ] || command -v "$CHROMIUM" >/dev/null 2>&1; then exit 0; fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium not found and apt-get is missing: the browser tests will be skipped" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
echo "installing chromium for the browser tests (apt-get)" >&2
{ $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
  || echo "chromium could not be installed: the browser tests will be skipped" >&2
exit 0
