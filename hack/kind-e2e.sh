#!/usr/bin/env bash
# Runs the e2e suite (test/e2e) against videogen deployed to a throwaway kind cluster, the way
# `make deploy` installs it, on a machine that can download nothing but Debian packages and Go
# modules. `make test-e2e-kind` calls it; every step says what it does and, where it cannot work
# on this machine, exactly which step and why:
#   1. Docker: as root, installs and starts an engine that can run kind's privileged nodes
#      (hack/kind/setup-docker.sh: Debian's docker.io with the capdrop-runc runtime);
#   2. kind, built from its Go module (hack/tools/kind);
#   3. the node image, built offline and cached (hack/kind/node-image.sh: Kubernetes from Go
#      modules, Debian's containerd, runc and CNI plugins), and the cluster (hack/kind/cluster.yaml);
#   4. the operator and worker images, built offline (hack/kind/images.sh) and loaded;
#   5. config/e2e deployed, with video.eraser routed to the Kubernetes Job backend (its pods run
#      the worker image: `worker job`), the demo account and an API key;
#   6. the suite.
#
# Usage: hack/kind-e2e.sh [go test flags...]   e.g. hack/kind-e2e.sh -ginkgo.focus=watermark
# (the eraser spec, on the Job backend; a focus that matches no spec fails the run rather than
# passing with nothing run)
#
# Without a Docker engine it can start (not root, no Docker) it prints why and exits 0, so it is
# safe to call anywhere; KIND_E2E=required (what .ci/run sets) makes that a failure instead.
#
# Knobs: KIND_CLUSTER (default videogen-e2e), KEEP_CLUSTER=1 keeps the cluster (and prints how
# to reach it) instead of deleting it at the end, KIND_IMAGE a node image of your own (then
# kind's default cluster configuration is used: a kindest/node image on a machine that can pull
# it), KIND_IMAGES=docker builds the two images with `make docker-build` (needs a registry for
# the base images) instead of offline. The cluster must be Kubernetes 1.32 or newer (CRD
# selectableFields).
#
# What the suite gets (test/e2e/target_test.go reads these with E2E_MODE=kind):
#   E2E_MODE=kind
#   E2E_API_URL            http://127.0.0.1:<port>, a port-forward to the API Service
#   E2E_API_KEY            vg_… for account "demo" (videogenctl apikey create)
#   E2E_KUBECONFIG         the kind cluster's kubeconfig (cluster-admin)
#   E2E_SYSTEM_NAMESPACE   videogen-system (API key, connector and signing Secrets; PaymentEvents)
#   E2E_EVENT_SERVICE_TOKEN  the EventService.Handle token config/e2e mounts
#   E2E_HOST_ADDRESS       the kind network's gateway: where pods reach the suite's receivers
#   E2E_SHORT_TEMPLATE     demo-portrait   (video.short, 30 points)
#   E2E_TEMPLATE_TEMPLATE  demo-countdown  (video.template, 2–10 s)
#   E2E_POSE_TEMPLATE      demo-pose       (image.pose, 15 points)
#   E2E_FACE_URL           a face photo, E2E_VIDEO_URL a watermarked video: URLs on the worker's
#                          blob store, reachable from inside the cluster only
#   E2E_WORKER_URL         http://127.0.0.1:<port>, a port-forward to the worker Service
#   E2E_WORKER_PUBLIC_URL  the in-cluster base of result URLs (the worker's --public-url):
#                          replace it with E2E_WORKER_URL to download a task's result
#   E2E_JOB_BACKEND        jobs: the backend (config/e2e) that runs video.eraser as Kubernetes Jobs
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { echo "kind-e2e: $*"; }

# skip says why the suite cannot run here: a skip, or with KIND_E2E=required a failure.
skip() {
  if [ "${KIND_E2E:-}" = required ]; then
    echo "kind-e2e: cannot run: $*" >&2
    exit 1
  fi
  echo "kind-e2e: skipped: $*"
  exit 0
}
step() { log "[$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }

step "1/6 Docker"
if [ "$(id -u)" -eq 0 ]; then
  hack/kind/setup-docker.sh || skip "no Docker engine that can run kind's nodes (hack/kind/setup-docker.sh said why above)"
else
  command -v docker >/dev/null 2>&1 || skip "no Docker engine (docker is not installed; as root, hack/kind/setup-docker.sh installs one)"
  docker info >/dev/null 2>&1 || skip "docker info failed: no engine runs, or this user may not use its socket ($(docker info 2>&1 >/dev/null | tail -n1)); as root, hack/kind/setup-docker.sh starts one"
fi
for tool in go curl; do
  command -v "$tool" >/dev/null 2>&1 || { echo "kind-e2e: $tool is required" >&2; exit 1; }
done

step "2/6 kind and the node image"
make --no-print-directory "$PWD/bin/kind"
export PATH=$PWD/bin:$PATH
if [ -n "${KIND_IMAGE:-}" ]; then
  node_image=$KIND_IMAGE
  kind_config=()
else
  [ "$(id -u)" -eq 0 ] || skip "building the node image needs root (debootstrap); set KIND_IMAGE to a node image instead"
  node_image=$(hack/kind/node-image.sh)
  kind_config=(--config hack/kind/cluster.yaml)
  # kubectl of the same build as the node, unless one is installed.
  command -v kubectl >/dev/null 2>&1 || export PATH=$PATH:$(hack/kind/build-kubernetes.sh)
fi
command -v kubectl >/dev/null 2>&1 || { echo "kind-e2e: kubectl is required" >&2; exit 1; }

cluster=${KIND_CLUSTER:-videogen-e2e}
img=videogen-operator:e2e      # the tags config/e2e expects
worker_img=videogen-worker:e2e
ns=videogen-system
workdir=$(mktemp -d)
export KUBECONFIG=$workdir/kubeconfig
pids=()

# diagnose prints what a failed run needs to be understood, before the cluster goes.
diagnose() {
  log "--- state of the cluster"
  kubectl get pods,deployments,services -A -o wide || true
  kubectl -n "$ns" describe pods || true
  for target in deployment/videogen-controller-manager deployment/videogen-worker; do
    log "--- logs of $target"
    kubectl -n "$ns" logs "$target" --all-containers --tail=200 || true
  done
}

cleanup() {
  local rc=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ "$rc" -ne 0 ] && [ -f "$KUBECONFIG" ]; then diagnose; fi
  if [ "${KEEP_CLUSTER:-0}" = 1 ]; then
    log "keeping cluster $cluster: export KUBECONFIG=$KUBECONFIG"
  else
    kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
    rm -rf "$workdir"
  fi
  exit "$rc"
}
trap cleanup EXIT

# forward SERVICE PORT: port-forwards a Service to a free local port, in the background.
forward() {
  kubectl -n "$ns" port-forward "service/$1" ":$2" >"$workdir/forward-$1.log" 2>&1 &
  pids+=("$!")
}

# local_port SERVICE: the local port of SERVICE's port-forward, once it listens.
local_port() {
  local out=$workdir/forward-$1.log port
  for _ in $(seq 1 50); do
    port=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$out" | head -n1)
    if [ -n "$port" ]; then
      echo "$port"
      return 0
    fi
    sleep 0.2
  done
  echo "kind-e2e: port-forward to $1 did not start:" >&2
  cat "$out" >&2
  return 1
}

if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
  log "deleting the cluster $cluster left by an earlier run"
  kind delete cluster --name "$cluster"
fi
step "3/6 the cluster ($node_image)"
kind create cluster --name "$cluster" --kubeconfig "$KUBECONFIG" --wait 180s --image "$node_image" "${kind_config[@]}"
# kind returns once the node is Ready, when the control plane may still be settling: a CI run
# saw etcd restart a few seconds in and the first request fail. Wait for the kube-apiserver to
# be ready, and for the control plane's pods, before asking it anything that must succeed.
for i in $(seq 1 120); do
  kubectl get --raw /readyz >/dev/null 2>&1 && break
  [ "$i" -lt 120 ] || { kubectl get --raw '/readyz?verbose' >&2 || true; echo "kind-e2e: the kube-apiserver was not ready after 120 s" >&2; exit 1; }
  sleep 1
done
kubectl -n kube-system wait --for=condition=Ready --timeout=180s pod --all
minor=$(kubectl version -o json | sed -n '/serverVersion/,$ s/.*"minor": *"\([0-9]*\).*/\1/p' | head -1)
if [ "${minor:-0}" -lt 32 ]; then
  echo "kind made a Kubernetes 1.${minor:-?} cluster; videogen needs 1.32 or newer (set KIND_IMAGE, or update kind)" >&2
  exit 1
fi

step "4/6 the images $img and $worker_img"
if [ "${KIND_IMAGES:-offline}" = docker ]; then
  make --no-print-directory docker-build IMG="$img" WORKER_IMG="$worker_img"
else
  hack/kind/images.sh "$img" "$worker_img"
fi
make --no-print-directory kind-load KIND_CLUSTER="$cluster" IMG="$img" WORKER_IMG="$worker_img"

step "5/6 deploying config/e2e"
make --no-print-directory deploy DEPLOY_DIR=config/e2e IMG="$img" WORKER_IMG="$worker_img"
kubectl wait --for=condition=Established --timeout=60s crd --all
kubectl -n "$ns" wait --for=condition=Available --timeout=300s deployment --all

log "creating the demo account and templates"
bin/kustomize build config/e2e/demo | kubectl apply --server-side -f -
kubectl -n demo wait --for=condition=Applied --timeout=120s pointtopup/welcome

log "issuing an API key"
api_key=$(go run ./cmd/videogenctl apikey create --account demo --description "kind e2e" -o json |
  sed -n 's/.*"key": *"\([^"]*\)".*/\1/p')
[ -n "$api_key" ] || { echo "kind-e2e: videogenctl printed no key" >&2; exit 1; }

forward videogen-api 80
forward videogen-worker 8080
api_port=$(local_port videogen-api)
worker_port=$(local_port videogen-worker)
api_url=http://127.0.0.1:$api_port
log "waiting for the API at $api_url"
for _ in $(seq 1 60); do
  if curl -sf --max-time 5 -o /dev/null -H "Authorization: Bearer $api_key" "$api_url/v1/balance"; then break; fi
  sleep 1
done
curl -sfS --max-time 10 -H "Authorization: Bearer $api_key" "$api_url/v1/balance"
echo

worker_public=http://videogen-worker.$ns.svc:8080
# Pods reach servers on this machine (the suite's webhook receivers) through the gateway of
# kind's Docker network, where they listen on all interfaces.
host_address=$(docker network inspect kind -f '{{range .IPAM.Config}}{{.Gateway}} {{end}}' |
  tr ' ' '\n' | grep -E '^[0-9]+(\.[0-9]+){3}$' | head -1 || true)
[ -n "$host_address" ] || log "no IPv4 gateway on the kind network: specs with receivers will skip"
step "6/6 the e2e suite"
E2E_MODE=kind \
E2E_API_URL=$api_url \
E2E_API_KEY=$api_key \
E2E_KUBECONFIG=$KUBECONFIG \
E2E_SYSTEM_NAMESPACE=$ns \
E2E_EVENT_SERVICE_TOKEN=$(tr -d '\n' < config/e2e/event-service-tokens) \
E2E_HOST_ADDRESS=$host_address \
E2E_SHORT_TEMPLATE=demo-portrait \
E2E_TEMPLATE_TEMPLATE=demo-countdown \
E2E_POSE_TEMPLATE=demo-pose \
E2E_FACE_URL=$worker_public/v1/blobs/a13976ff7481a7c6df53dab8e96245d9.jpg \
E2E_VIDEO_URL=$worker_public/v1/blobs/8ef5e7e8348da325f029fcaca3e59e3f.mp4 \
E2E_WORKER_URL=http://127.0.0.1:$worker_port \
E2E_WORKER_PUBLIC_URL=$worker_public \
E2E_JOB_BACKEND=jobs \
  go test -count=1 -timeout 30m ./test/e2e/ -ginkgo.v -ginkgo.fail-on-empty "$@"
