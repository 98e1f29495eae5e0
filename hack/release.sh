#!/usr/bin/env bash
# Writes the release artefacts of one version into dist/: install.yaml (config/default with the
# version's images), the packaged Helm chart (version and appVersion set, image repositories
# under REGISTRY), and SHA256SUMS. Called by `make release VERSION=x.y.z [REGISTRY=…]`.
#
# Usage: hack/release.sh VERSION [REGISTRY]      (make release VERSION=x.y.z [REGISTRY=…])
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version=${1:?usage: hack/release.sh VERSION [REGISTRY]}
registry=${2:-}
helm=${HELM:-bin/helm}
if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release: VERSION must be semantic, like 1.2.3 or 1.2.3-rc.1 (got $version)" >&2
  exit 1
fi
repo() { echo "${registry:+${registry%/}/}$1"; }
img=$(repo videogen-operator):$version
worker_img=$(repo videogen-worker):$version

rm -rf dist && mkdir -p dist
make --no-print-directory build-installer IMG="$img" WORKER_IMG="$worker_img" >/dev/null

chart=$(mktemp -d)/videogen-operator
trap 'rm -rf "$(dirname "$chart")"' EXIT
cp -R charts/videogen-operator "$chart"
# The image repositories are the only lines of values.yaml whose key is `repository:`.
sed -i.orig -e "s|^  repository: videogen-operator$|  repository: $(repo videogen-operator)|" \
  -e "s|^    repository: videogen-worker$|    repository: $(repo videogen-worker)|" "$chart/values.yaml"
rm "$chart/values.yaml.orig"
grep -q "repository: $(repo videogen-operator)$" "$chart/values.yaml" &&
  grep -q "repository: $(repo videogen-worker)$" "$chart/values.yaml" ||
  { echo "release: could not set the image repositories in values.yaml" >&2; exit 1; }
"$helm" lint --quiet "$chart" >/dev/null
"$helm" package "$chart" --version "$version" --app-version "$version" --destination dist >/dev/null

(cd dist && sha256sum install.yaml "videogen-operator-$version.tgz" > SHA256SUMS)
echo "dist/ for $version (images $img, $worker_img):"
ls -1 dist | sed 's/^/  /'
