#!/usr/bin/env bash
# Makes a fresh machine ready for `make run` or `make test`, before anything is built: checks Go
# and the Debian packages the project runs (ffmpeg and facedetect for the reference worker;
# protoc for the generated-code check), installs the missing ones when it can (root on Debian or
# Ubuntu), and otherwise stops at once with the exact command to run.
#
# Usage: hack/setup.sh run|test      (make run and .ci/run call it; so does make setup)
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail

mode=${1:-test}
log() { printf 'setup: %s\n' "$*" >&2; }

# What each mode needs, as Debian packages, and a command that proves each one is usable.
# ffmpeg and facedetect (OpenCV Haar cascades) do the reference worker's media work.
packages=(ffmpeg facedetect)
commands=(ffmpeg facedetect)
case $mode in
  run) ;;
  # protoc 3.21 with its well-known types regenerates the Event Service code to check it.
  test)
    packages+=(make git protobuf-compiler libprotobuf-dev)
    commands+=(make git protoc)
    ;;
  *) log "unknown mode $mode: use run or test"; exit 2 ;;
esac

# Go comes from go.dev, not from Debian (whose Go is older than go.mod asks for).
if ! command -v go >/dev/null 2>&1; then
  log "Go is missing: install Go $(sed -n 's/^go \([0-9.]*\).*/\1/p' "$(dirname "$0")/../go.mod") or newer from https://go.dev/dl/ and put it on PATH"
  exit 1
fi

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
else
  for c in "${commands[@]}"; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "missing: ${missing[*]}. Install them with your package manager (facedetect is a small"
    log "Python script over OpenCV's Haar cascades: https://www.thregr.org/~wavexx/software/facedetect/), then run make again."
    exit 1
  fi
  exit 0
fi
[ ${#missing[@]} -eq 0 ] && exit 0

install=(apt-get install -y --no-install-recommends "${missing[@]}")
if [ "$(id -u)" -ne 0 ]; then
  log "missing Debian packages: ${missing[*]}. Install them, then run make again:"
  log ""
  log "    sudo apt-get update && sudo ${install[*]}"
  log ""
  exit 1
fi
log "installing ${missing[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "installed ${missing[*]}"
