#!/usr/bin/env bash
# The Debian packages icml25's tests and two rooms need beside the Python ones:
#   chromium   the browser tests (kedro-viz graph, MLflow compare view, scorecard page)
#   espeak-ng  acorn and sortformer synthesise their speech offline
#   flite      a second offline voice for sortformer's speakers
# Installs the missing ones with apt-get when it can (root, or passwordless sudo); otherwise
# stops and prints the exact command to run. `make test` runs this before any test.
set -euo pipefail
missing=()
for pkg in chromium:/usr/bin/chromium espeak-ng:/usr/bin/espeak-ng flite:/usr/bin/flite; do
  [ -x "${ICML25_SYSTEM_ROOT:-}${pkg#*:}" ] || missing+=("${pkg%%:*}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
command="apt-get update && apt-get install -y ${missing[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "icml25 needs the Debian packages: ${missing[*]} (no apt-get on this machine;" \
       "install their equivalents with your package manager)" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo=(sudo -n)
else
  echo "icml25 needs the Debian packages: ${missing[*]}. Install them, then re-run:" >&2
  echo "  sudo sh -c '$command'" >&2
  exit 1
fi
echo "installing the Debian packages icml25 needs: ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
