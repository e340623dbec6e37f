#!/usr/bin/env bash
# Run a command with the studio's own devices: a private Xvfb display and a PulseAudio
# daemon with a null sink/source (so benchmarks never play into your real speakers).
# The devices stop when the command ends, whatever its outcome.
set -uo pipefail
cd "$(dirname "$0")/.."
export AVATAR_SERVICES_DIR=${AVATAR_SERVICES_DIR:-$(mktemp -d /tmp/avatar-services.XXXXXX)}
for n in $(seq 90 130); do [ -e "/tmp/.X$n-lock" ] || [ -e "/tmp/.X11-unix/X$n" ] || { export AVATAR_DISPLAY=:$n; break; }; done
trap 'scripts/services.sh stop' EXIT
eval "$(scripts/services.sh start)" || { echo "could not start Xvfb/PulseAudio" >&2; exit 1; }
export QT_QPA_PLATFORM=xcb PYQTGRAPH_QT_LIB=PySide6 OPENBLAS_NUM_THREADS=1
"$@"
