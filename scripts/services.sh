#!/usr/bin/env bash
# Start or stop the real devices the tests use: an X server (Xvfb) with Mesa GL and a
# PulseAudio daemon with a null sink ("vsink") and a null source ("vmic").
# Usage: scripts/services.sh start|stop|env   (state lives in $AVATAR_SERVICES_DIR)
set -euo pipefail
STATE=${AVATAR_SERVICES_DIR:-/tmp/avatar-studio-services}
DISPLAY_NUM=${AVATAR_DISPLAY:-:97}

print_env() {
  echo "export DISPLAY=$DISPLAY_NUM"
  echo "export PULSE_SERVER=unix:$STATE/pulse/native"
  echo "export XDG_RUNTIME_DIR=$STATE/runtime"
  echo "export AVATAR_SERVICES_DIR=$STATE"
}

start() {
  mkdir -p "$STATE/pulse" "$STATE/runtime" "$STATE/home"
  chmod 700 "$STATE/runtime"
  if ! { [ -f "$STATE/xvfb.pid" ] && kill -0 "$(cat "$STATE/xvfb.pid")" 2>/dev/null; }; then
    rm -f "/tmp/.X${DISPLAY_NUM#:}-lock"
    Xvfb "$DISPLAY_NUM" -screen 0 1600x1000x24 -nolisten tcp +extension GLX </dev/null >"$STATE/xvfb.log" 2>&1 &
    echo $! >"$STATE/xvfb.pid"
    for _ in $(seq 50); do xdpyinfo -display "$DISPLAY_NUM" >/dev/null 2>&1 && break; sleep 0.1; done
    xdpyinfo -display "$DISPLAY_NUM" >/dev/null 2>&1 || { echo "Xvfb did not start; see $STATE/xvfb.log" >&2; exit 1; }
  fi
  if ! { [ -f "$STATE/pulse.pid" ] && kill -0 "$(cat "$STATE/pulse.pid")" 2>/dev/null; }; then
    cat >"$STATE/minimal.pa" <<PA
load-module module-native-protocol-unix auth-anonymous=1 socket=$STATE/pulse/native
load-module module-null-sink sink_name=vsink rate=48000
load-module module-null-source source_name=vmic rate=48000
set-default-sink vsink
set-default-source vmic
PA
    HOME="$STATE/home" XDG_RUNTIME_DIR="$STATE/runtime" pulseaudio -n -F "$STATE/minimal.pa" \
      --daemonize=yes --exit-idle-time=-1 --disallow-exit --use-pid-file=yes --log-target=file:"$STATE/pulse.log" </dev/null >/dev/null 2>&1
    for _ in $(seq 50); do
      PULSE_SERVER="unix:$STATE/pulse/native" pactl info >/dev/null 2>&1 && break; sleep 0.1
    done
    PULSE_SERVER="unix:$STATE/pulse/native" pactl info >/dev/null 2>&1 || { echo "PulseAudio did not start; see $STATE/pulse.log" >&2; exit 1; }
    pgrep -n -f "pulseaudio -n -F $STATE/minimal.pa" >"$STATE/pulse.pid"
    # A null sink stalls an output stream for ~2 s unless something keeps it busy.
    PULSE_SERVER="unix:$STATE/pulse/native" pacat --playback --latency-msec=20 -d vsink --raw /dev/zero </dev/null >/dev/null 2>&1 &
    echo $! >"$STATE/pacat.pid"
  fi
}

stop() {
  for name in pacat pulse xvfb; do
    if [ -f "$STATE/$name.pid" ]; then
      kill "$(cat "$STATE/$name.pid")" 2>/dev/null || true
      rm -f "$STATE/$name.pid"
    fi
  done
}

case "${1:-}" in
  start) start; print_env ;;
  stop) stop ;;
  env) print_env ;;
  *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
esac
