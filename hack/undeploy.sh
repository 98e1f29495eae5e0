#!/usr/bin/env bash
# Deletes what DIR (default config/default) applied: the CRDs, and with them every task,
# account, top-up, template and payment event in the cluster (make undeploy runs it).
# Deleting a CRD deletes its objects, but accounts and top-ups keep the ledger's finalizer
# (videogen.dev/ledger) while the books hold their points, a task whose stage runs keeps
# videogen.dev/cancel-work, and the manager that would take them off goes in the same delete:
# a plain `kubectl delete -f` left the CRDs Terminating and waited for ever. So once the CRDs
# are being deleted (their objects take no new finalizers then), this takes the finalizers
# off those objects and waits until the CRDs are gone. A kustomization without the CRDs
# leaves them and their objects alone.
#
# Usage: hack/undeploy.sh [DIR]
#   KUSTOMIZE (bin/kustomize) and KUBECTL (kubectl) name the binaries; KUBECONFIG the cluster.
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail
kubectl=${KUBECTL:-kubectl}

# --wait=false: the CRDs are waited for below; a namespace goes once the cluster emptied it.
"${KUSTOMIZE:-bin/kustomize}" build "${1:-config/default}" | "$kubectl" delete --ignore-not-found --wait=false -f -

# The videogen CRDs being deleted, as plural.group (what kubectl get takes).
deleting() {
  "$kubectl" get crd -o jsonpath='{range .items[?(@.metadata.deletionTimestamp)]}{.metadata.name}{"\n"}{end}' |
    grep '\.videogen\.dev$' || true
}

for _ in $(seq 60); do
  crds=$(deleting)
  [ -n "$crds" ] || exit 0
  for crd in $crds; do
    # Namespace and name of each object that still has finalizers (Templates: no namespace).
    "$kubectl" get "$crd" -A -o jsonpath='{range .items[?(@.metadata.finalizers)]}{.metadata.namespace}{" "}{.metadata.name}{"\n"}{end}' 2>/dev/null |
      while read -r ns name; do
        [ -n "$name" ] || { name=$ns; ns=""; }
        # It may be gone meanwhile; the next round sees what is left.
        "$kubectl" patch "$crd" "$name" ${ns:+-n "$ns"} --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null || true
      done || true # the CRD went meanwhile
  done
  sleep 2
done
echo "CRDs still being deleted after 2 minutes: $(deleting | tr '\n' ' ')" >&2
"$kubectl" get $(deleting | paste -sd, -) -A >&2 || true
exit 1
