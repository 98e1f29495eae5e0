#!/usr/bin/env bash
# Makes a Docker engine that can run kind's nodes on this machine, and prints nothing else on
# stdout. Steps, each skipped when already done:
#   1. installs Debian's docker.io when dockerd is missing (root on Debian/Ubuntu only);
#   2. builds hack/kind/capdrop-runc and registers it as dockerd's default runtime, because
#      kind's `docker run --privileged` asks for capabilities this machine's bounding set may
#      lack (CAP_SYS_RESOURCE here): runc would refuse every node;
#   3. starts dockerd in the background when no engine answers (these machines run no init
#      system; its log goes to $DOCKERD_LOG).
# It exits non-zero with the reason when a step cannot work here.
#
# Env: DOCKERD_LOG (default /var/log/videogen-dockerd.log), CAPDROP_RUNC_BIN (where the runtime
# is installed, default /usr/local/libexec/videogen/capdrop-runc).
#
# Usage: hack/kind/setup-docker.sh      (as root)
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

log() { printf 'kind-docker: %s\n' "$*" >&2; }
fail() { log "$*"; exit 1; }

runtime_bin=${CAPDROP_RUNC_BIN:-/usr/local/libexec/videogen/capdrop-runc}
dockerd_log=${DOCKERD_LOG:-/var/log/videogen-dockerd.log}
daemon_json=/etc/docker/daemon.json

if docker info >/dev/null 2>&1 && docker info --format '{{.DefaultRuntime}}' 2>/dev/null | grep -qx capdrop-runc; then
  exit 0
fi
[ "$(id -u)" -eq 0 ] || fail "a Docker engine with the capdrop-runc runtime is needed, and only root can set one up (run as root: hack/kind/setup-docker.sh)"

if ! command -v dockerd >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || fail "dockerd is missing and this is not Debian or Ubuntu: install Docker Engine, then run again"
  log "installing Debian's docker.io (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends docker.io >/dev/null
fi

log "building the capdrop-runc runtime into $runtime_bin"
mkdir -p "$(dirname "$runtime_bin")"
CGO_ENABLED=0 go build -trimpath -o "$runtime_bin.tmp" ./hack/kind/capdrop-runc
mv "$runtime_bin.tmp" "$runtime_bin"

# daemon.json: keep what is there, add the runtime and make it the default.
mkdir -p /etc/docker
want=$(printf '{"runtimes":{"capdrop-runc":{"path":"%s"}},"default-runtime":"capdrop-runc"}' "$runtime_bin")
if [ -s "$daemon_json" ]; then
  merged=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d.update(json.loads(sys.argv[2])); print(json.dumps(d, indent=2))' "$daemon_json" "$want")
else
  merged=$want
fi
if [ "$(cat "$daemon_json" 2>/dev/null)" != "$merged" ]; then
  printf '%s\n' "$merged" >"$daemon_json"
  if pgrep -x dockerd >/dev/null; then
    log "restarting dockerd for the new runtime"
    pkill -x dockerd
    for _ in $(seq 1 50); do pgrep -x dockerd >/dev/null || break; sleep 0.2; done
  fi
fi

if ! pgrep -x dockerd >/dev/null; then
  log "starting dockerd (log: $dockerd_log)"
  nohup dockerd >>"$dockerd_log" 2>&1 </dev/null &
fi
for _ in $(seq 1 100); do
  docker info >/dev/null 2>&1 && break
  sleep 0.3
done
docker info >/dev/null 2>&1 || { tail -n 30 "$dockerd_log" >&2 || true; fail "dockerd did not start (log above)"; }
[ "$(docker info --format '{{.DefaultRuntime}}')" = capdrop-runc ] || fail "dockerd runs without the capdrop-runc default runtime: is another engine configured elsewhere?"
log "Docker $(docker version --format '{{.Server.Version}}') serves, default runtime capdrop-runc"
