#!/usr/bin/env bash
# Lint, the import contract and the whole pytest suite, with real devices (Xvfb with Mesa GL,
# PulseAudio null sink/source) started before and stopped after — also when tests fail.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
if [ -z "${AVATAR_IN_SERVICES:-}" ]; then
  AVATAR_IN_SERVICES=1 exec scripts/with-services.sh "$0" "$@"
fi
export AVATAR_STUDIO_HOME=$AVATAR_SERVICES_DIR/studio-home
status=0
echo "== ruff"; "$VENV/bin/ruff" check . || status=1
echo "== import contract"; "$VENV/bin/lint-imports" || status=1
echo "== pytest"; "$VENV/bin/python" -m pytest "$@" || status=1
exit $status
