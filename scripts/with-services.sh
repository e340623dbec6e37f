#!/usr/bin/env bash
# Run a command with the studio's own devices: a private Xvfb display and a PulseAudio
# daemon with a null sink/source (so benchmarks never play into your real speakers).
# The devices stop when the command ends, whatever its outcome.
set -uo pipefail
cd "$(dirname "$0")/.."
export AVATAR_SERVICES_DIR=${AVATAR_SERVICES_DIR:-$(mktemp -d /tmp/avatar-services.XXXXXX)}
trap 'scripts/services.sh stop' EXIT
# services.sh names what failed and its log; a failure must stop here, not run tests without devices.
service_env=$(scripts/services.sh start) || exit 1
eval "$service_env"
export QT_QPA_PLATFORM=xcb PYQTGRAPH_QT_LIB=PySide6 OPENBLAS_NUM_THREADS=1
"$@"
