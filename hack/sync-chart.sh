#!/usr/bin/env bash
# Copies into charts/videogen-operator/files the parts of config/ that the chart renders as they
# are: the generated CRDs and RBAC (so a change of the API types or RBAC markers reaches the
# chart with `make manifests`), the static roles, Services, NetworkPolicies and admission
# policies, and the alerts.
# A chart cannot read files outside its directory, hence copies; hack/verify-generated.sh
# fails when they are stale.
#
# Usage: hack/sync-chart.sh      (make manifests runs it)
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

files=charts/videogen-operator/files
rm -rf "$files"
mkdir -p "$files"/{crds,rbac,services,network-policy,policies,prometheus}
cp config/crd/bases/*.yaml "$files/crds/"
for dir in rbac network-policy; do
  for f in config/$dir/*.yaml; do
    [ "$(basename "$f")" = kustomization.yaml ] || cp "$f" "$files/$dir/"
  done
done
cp config/default/*_service.yaml "$files/services/"
for f in config/policies/*.yaml; do
  case "$(basename "$f")" in kustomization.yaml|kustomizeconfig.yaml) ;; *) cp "$f" "$files/policies/" ;; esac
done
cp config/prometheus/alerts.yaml "$files/prometheus/"
