#!/usr/bin/env bash
# Builds a kind node image on this machine with nothing pulled, and prints its name. kind's own
# node images (kindest/node) and its image builder both start from images on a registry; this
# one starts from Debian packages and Go modules:
#   - a Debian bookworm root filesystem (debootstrap) with systemd, containerd, runc, the CNI
#     plugins and iptables, cached by its package list;
#   - kubelet, kubeadm and kubectl, and the control plane's images (kube-apiserver,
#     kube-controller-manager, kube-scheduler, kube-proxy, etcd, CoreDNS, pause) assembled from
#     the programs hack/kind/build-kubernetes.sh builds, saved into /kind/images and imported
#     into containerd when the node boots (videogen-images.service);
#   - the files of hack/kind/node: the entrypoint, containerd's configuration, the kubelet's
#     units, a bridge CNI configuration for a one-node cluster.
# The image is tagged with a digest of all of that, so an unchanged build is reused (docker
# keeps it across runs on a machine that keeps /var/lib/docker).
#
# Needs root (debootstrap, chroot) and a Docker engine (hack/kind/setup-docker.sh).
# Env: K8S_VERSION (1.37.1), ETCD_VERSION (3.6.7), COREDNS_VERSION (1.14.6), PAUSE_VERSION
# (3.10.2), KIND_CACHE (~/.cache/videogen-operator/kind), DEBIAN_MIRROR
# (http://deb.debian.org/debian).
#
# Usage: hack/kind/node-image.sh      (prints the image name)
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD

export K8S_VERSION=${K8S_VERSION:-1.37.1} ETCD_VERSION=${ETCD_VERSION:-3.6.7}
export COREDNS_VERSION=${COREDNS_VERSION:-1.14.6} PAUSE_VERSION=${PAUSE_VERSION:-3.10.2}
CACHE=${KIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/videogen-operator/kind}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# shellcheck source=hack/kind/lib.sh
source "$ROOT/hack/kind/lib.sh"
LOG_PREFIX=kind-node-image

# What a node runs besides Kubernetes' own programs.
node_packages=systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,iptables,conntrack,kmod,ca-certificates,procps,iproute2,ethtool,socat,mount,util-linux

bin=$(hack/kind/build-kubernetes.sh)
rootfs=$(debian_rootfs node "$node_packages")

# The image's name says what is in it: the inputs' digest.
digest=$( {
  cat "$bin/VERSIONS"
  echo "$node_packages"
  (cd hack/kind && find node -type f | LC_ALL=C sort | xargs sha256sum)
  sha256sum hack/kind/node-image.sh hack/kind/lib.sh
  (cd "$bin" && sha256sum kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns pause)
} | sha256sum | cut -c1-12)
image=videogen/kind-node:v$K8S_VERSION-$digest
if docker image inspect "$image" >/dev/null 2>&1; then
  log "reusing $image"
  echo "$image"
  exit 0
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/images"

# control_plane_image NAME ENTRYPOINT FILE...: a registry.k8s.io image of the programs FILE
# (in /usr/local/bin, or / for ENTRYPOINT's own), saved for the node's containerd.
control_plane_image() {
  local name=$1 entrypoint=$2 dir
  shift 2
  dir=$stage/$(basename "${name%%:*}")
  mkdir -p "$dir/usr/local/bin" "$dir/etc" "$dir/tmp"
  chmod 1777 "$dir/tmp"
  cp "$@" "$dir/usr/local/bin/"
  # The users distroless images have: the components run as root here, as kubeadm runs them.
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$dir/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' >"$dir/etc/group"
  import_dir "$dir" "$name" "ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" ${entrypoint:+"ENTRYPOINT [\"$entrypoint\"]"}
  docker save "$name" -o "$stage/images/$(basename "${name%%:*}").tar"
  docker rmi "$name" >/dev/null
}

log "assembling the control plane's images"
reg=registry.k8s.io
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  control_plane_image "$reg/$c:v$K8S_VERSION" "" "$bin/$c"
done
# kube-proxy programs the node's iptables (nft backend) with iptables-restore: the image gets
# those programs and their libraries from the node's own root filesystem.
proxy=$stage/kube-proxy-rootfs
# Merged /usr, as Debian's: ldd names /lib/... and the programs live under /usr.
mkdir -p "$proxy/usr/lib/x86_64-linux-gnu" "$proxy/usr/lib64" "$proxy/usr/bin" "$proxy/usr/sbin"
for d in lib lib64 bin sbin; do ln -s "usr/$d" "$proxy/$d"; done
copy_with_libraries "$rootfs" "$proxy" /usr/sbin/xtables-nft-multi
cp -a "$rootfs/usr/lib/x86_64-linux-gnu/xtables" "$proxy/usr/lib/x86_64-linux-gnu/"
for f in "$proxy"/usr/lib/x86_64-linux-gnu/xtables/*.so; do copy_with_libraries "$rootfs" "$proxy" "${f#"$proxy"}"; done
for tool in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -sf xtables-nft-multi "$proxy/usr/sbin/$tool"
done
mkdir -p "$proxy/usr/local/bin" "$proxy/etc" "$proxy/run" "$proxy/var/run"
cp "$bin/kube-proxy" "$proxy/usr/local/bin/"
printf 'root:x:0:0:root:/root:/sbin/nologin\n' >"$proxy/etc/passwd"
import_dir "$proxy" "$reg/kube-proxy:v$K8S_VERSION" "ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
docker save "$reg/kube-proxy:v$K8S_VERSION" -o "$stage/images/kube-proxy.tar"
docker rmi "$reg/kube-proxy:v$K8S_VERSION" >/dev/null
control_plane_image "$reg/etcd:$ETCD_VERSION-0" "" "$bin/etcd"
control_plane_image "$reg/coredns/coredns:v$COREDNS_VERSION" /usr/local/bin/coredns "$bin/coredns"
control_plane_image "$reg/pause:$PAUSE_VERSION" /usr/local/bin/pause "$bin/pause"

log "assembling the node"
node=$stage/node
cp -a "$rootfs" "$node"
cp -a hack/kind/node/. "$node/"
install -m 0755 "$bin/kubelet" "$bin/kubeadm" "$bin/kubectl" "$node/usr/bin/"
mkdir -p "$node/kind/images"
mv "$stage"/images/*.tar "$node/kind/images/"
echo "v$K8S_VERSION" >"$node/kind/version"
chroot "$node" systemctl enable kubelet.service videogen-images.service containerd.service >/dev/null 2>&1
# A fresh machine-id per node (the entrypoint), and no getty on the node's console.
: >"$node/etc/machine-id"
chroot "$node" systemctl mask getty@tty1.service console-getty.service >/dev/null 2>&1
import_dir "$node" "$image" 'ENTRYPOINT ["/usr/local/bin/entrypoint"]'
log "built $image"
echo "$image"
