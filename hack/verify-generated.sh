#!/usr/bin/env bash
# Fails when generated files (deepcopy, CRDs, RBAC, the chart's copies of config/) were stale: it fingerprints them, runs the
# generators (`make manifests generate`), and compares. Works in a dirty tree too, so a developer
# who edited api/ without regenerating is told so before the tests run.
#
# Usage: hack/verify-generated.sh      (make verify-generated)
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fingerprint() {
  find api config/crd/bases config/rbac/role.yaml charts/videogen-operator/files -type f \( -name 'zz_generated*.go' -o -name '*.yaml' \) -print0 |
    sort -z | xargs -0 sha256sum
}

before=$(fingerprint)
make --no-print-directory manifests generate >/dev/null
after=$(fingerprint)
if [ "$before" != "$after" ]; then
  echo "Generated files were stale and have just been regenerated:" >&2
  diff <(echo "$before") <(echo "$after") | sed -n 's/^> [0-9a-f]*  /  /p' >&2
  echo "Review them and commit them with your change." >&2
  exit 1
fi
