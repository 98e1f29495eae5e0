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
# The kube-apiserver's CRD finalizer deletes a CRD's objects and then the CRD; a failed attempt
# (a CRD deleted while its storage is still starting answers "storage is (re)initializing" on
# a loaded control plane) is retried with an exponential backoff that reaches minutes. So each
# round also annotates every CRD still being deleted: an update the finalizer sees makes it try
# again at once.
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

deadline=$((SECONDS + 120))
while [ "$SECONDS" -lt "$deadline" ]; do
  crds=$(deleting)
  [ -n "$crds" ] || exit 0
  for crd in $crds; do
    # Each object as namespace|name|finalizers (Templates: no namespace).
    objects=$("$kubectl" get "$crd" -A -o jsonpath='{range .items[*]}{.metadata.namespace}{"|"}{.metadata.name}{"|"}{.metadata.finalizers}{"\n"}{end}' 2>/dev/null) ||
      continue # the CRD went meanwhile, or its storage is not serving yet
    while IFS='|' read -r ns name finalizers; do
      [ -n "$finalizers" ] || continue
      # It may be gone meanwhile; the next round sees what is left.
      "$kubectl" patch "$crd" "$name" ${ns:+-n "$ns"} --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null || true
    done <<<"$objects"
    "$kubectl" annotate crd "$crd" --overwrite videogen.dev/undeploy-retry="$SECONDS" >/dev/null 2>&1 || true
  done
  sleep 2
done
echo "CRDs still being deleted after 2 minutes: $(deleting | tr '\n' ' ')" >&2
"$kubectl" get $(deleting | paste -sd, -) -A >&2 || true
for crd in $(deleting); do
  "$kubectl" get crd "$crd" -o jsonpath='{.metadata.name}{": "}{.status.conditions[?(@.type=="Terminating")].message}{"\n"}' >&2 || true
done
exit 1
