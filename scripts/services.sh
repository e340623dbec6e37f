#!/usr/bin/env bash
# Start or stop the real devices the tests use: an X server (Xvfb) with Mesa GL and a
# PulseAudio daemon with a null sink ("vsink") and a null source ("vmic").
# Usage: scripts/services.sh start|stop|env   (state lives in $AVATAR_SERVICES_DIR)
# Needs only what setup.sh installs (xvfb, x11-utils, pulseaudio, pulseaudio-utils) and coreutils:
# every process is started here, so its PID is known without ps/pgrep.
set -euo pipefail
STATE=${AVATAR_SERVICES_DIR:-/tmp/avatar-studio-services}
PULSE="unix:$STATE/pulse/native"

print_env() {
  echo "export DISPLAY=:$(cat "$STATE/display" 2>/dev/null)"
  echo "export PULSE_SERVER=$PULSE"
  echo "export XDG_RUNTIME_DIR=$STATE/runtime"
  echo "export AVATAR_SERVICES_DIR=$STATE"
}

running() { [ -f "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

# wait_for NAME PID LOG CHECK...: poll CHECK for 10 s; fail with one line naming what and where to look.
wait_for() {
  local name=$1 pid=$2 log=$3; shift 3
  for _ in $(seq 100); do
    "$@" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "error: $name did not answer ($(kill -0 "$pid" 2>/dev/null && echo "no reply in 10 s" || echo "it exited")); see $log" >&2
  stop
  exit 1
}

display_answers() { [ -s "$STATE/display" ] && xdpyinfo -display ":$(cat "$STATE/display")"; }

require() {
  local tool=$1 package=$2
  command -v "$tool" >/dev/null || { echo "error: '$tool' is missing: run 'make setup-dev' (Debian package $package)" >&2; exit 1; }
}

start() {
  require Xvfb xvfb; require xdpyinfo x11-utils; require pulseaudio pulseaudio; require pactl pulseaudio-utils
  mkdir -p "$STATE/pulse" "$STATE/runtime" "$STATE/home"
  chmod 700 "$STATE/runtime"
  if ! running xvfb; then
    # AVATAR_DISPLAY=:N asks for that display; otherwise Xvfb takes the first free one itself
    # (-displayfd), which also sees displays held by other chroots or containers.
    rm -f "$STATE/display"
    if [ -n "${AVATAR_DISPLAY:-}" ]; then
      if xdpyinfo -display "$AVATAR_DISPLAY" >/dev/null 2>&1; then
        echo "error: display $AVATAR_DISPLAY is already in use by another X server; unset AVATAR_DISPLAY to take a free one" >&2
        exit 1
      fi
      echo "${AVATAR_DISPLAY#:}" >"$STATE/display"
      Xvfb "$AVATAR_DISPLAY" -screen 0 1600x1000x24 -nolisten tcp +extension GLX </dev/null >"$STATE/xvfb.log" 2>&1 &
    else
      Xvfb -displayfd 3 -screen 0 1600x1000x24 -nolisten tcp +extension GLX </dev/null >"$STATE/xvfb.log" 2>&1 3>"$STATE/display" &
    fi
    echo $! >"$STATE/xvfb.pid"
    wait_for "Xvfb" $! "$STATE/xvfb.log" display_answers
  fi
  if ! running pulse; then
    cat >"$STATE/minimal.pa" <<PA
load-module module-native-protocol-unix auth-anonymous=1 socket=$STATE/pulse/native
load-module module-null-sink sink_name=vsink rate=48000
load-module module-null-source source_name=vmic rate=48000
set-default-sink vsink
set-default-source vmic
PA
    # Not daemonized: this shell starts it, so $! is its PID.
    HOME="$STATE/home" XDG_RUNTIME_DIR="$STATE/runtime" pulseaudio -n -F "$STATE/minimal.pa" \
      --daemonize=no --exit-idle-time=-1 --disallow-exit --use-pid-file=no \
      --log-target=file:"$STATE/pulse.log" </dev/null >/dev/null 2>&1 &
    echo $! >"$STATE/pulse.pid"
    wait_for "PulseAudio ($PULSE)" $! "$STATE/pulse.log" env PULSE_SERVER="$PULSE" pactl info
    # A null sink stalls an output stream for ~2 s unless something keeps it busy.
    PULSE_SERVER="$PULSE" pacat --playback --latency-msec=20 -d vsink --raw /dev/zero </dev/null >/dev/null 2>&1 &
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
