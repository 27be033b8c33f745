#!/usr/bin/env bash
# The Debian packages icml25 needs beside the Python ones:
#   python3-venv  `python3 -m venv` (the setup creates .venv with it)       [group: venv]
#   chromium      the browser tests (kedro-viz graph, MLflow compare view,  [group: test]
#                 scorecard page)
#   espeak-ng     acorn and sortformer synthesise their speech offline      [group: test]
#   flite         a second offline voice for sortformer's speakers          [group: test]
#   python3.11-doc  frugal's paper-scale corpus (the library's reST sources) [group: paper]
# Usage: system_packages.sh [venv] [test] [paper]   (no argument: venv and test). Installs the
# missing ones with apt-get when it can (root, or passwordless sudo); otherwise stops and prints
# the exact command to run. The Makefile runs the venv group before creating .venv, the test
# group before any test and the paper group before `make paper-check`.
set -euo pipefail
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(venv test)
missing=()
for group in "${groups[@]}"; do
  case "$group" in
    venv)
      "${PYTHON:-python3}" -c "import ensurepip, venv" 2>/dev/null || missing+=(python3-venv) ;;
    test)
      for pkg in chromium:/usr/bin/chromium espeak-ng:/usr/bin/espeak-ng flite:/usr/bin/flite; do
        [ -x "${ICML25_SYSTEM_ROOT:-}${pkg#*:}" ] || missing+=("${pkg%%:*}")
      done ;;
    paper)
      [ -d "${ICML25_SYSTEM_ROOT:-}/usr/share/doc/python3.11/html/_sources" ] \
        || missing+=(python3.11-doc) ;;
    *) echo "system_packages.sh: unknown group '$group' (expected venv, test or paper)" >&2
       exit 2 ;;
  esac
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
