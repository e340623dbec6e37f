#!/usr/bin/env bash
# Start the real devices (Xvfb + PulseAudio null sink/source), run lint, the import
# contract and the whole pytest suite, then stop the devices — also when tests fail.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
export AVATAR_SERVICES_DIR=${AVATAR_SERVICES_DIR:-$(mktemp -d /tmp/avatar-test-services.XXXXXX)}
for n in $(seq 90 120); do [ -e "/tmp/.X$n-lock" ] || [ -e "/tmp/.X11-unix/X$n" ] || { export AVATAR_DISPLAY=:$n; break; }; done
trap 'scripts/services.sh stop' EXIT
eval "$(scripts/services.sh start)" || { echo "could not start Xvfb/PulseAudio" >&2; exit 1; }
export QT_QPA_PLATFORM=xcb PYQTGRAPH_QT_LIB=PySide6 OPENBLAS_NUM_THREADS=1
export AVATAR_STUDIO_HOME=$AVATAR_SERVICES_DIR/home-studio

status=0
echo "== ruff"; "$VENV/bin/ruff" check . || status=1
echo "== import contract"; "$VENV/bin/lint-imports" || status=1
echo "== pytest"; "$VENV/bin/python" -m pytest "$@" || status=1
exit $status
