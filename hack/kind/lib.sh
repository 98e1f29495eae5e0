# shellcheck shell=bash
# Helpers of hack/kind/*.sh that assemble container images without a registry.

log() { printf '%s: %s\n' "${LOG_PREFIX:-kind}" "$*" >&2; }

# debian_rootfs NAME PACKAGES: a Debian bookworm root filesystem (debootstrap, minbase) with the
# comma-separated PACKAGES, cached in $CACHE by name and package list; prints its directory.
debian_rootfs() {
  local name=$1 packages=$2 dir key
  key=$(printf '%s %s' "$packages" "$MIRROR" | sha256sum | cut -c1-12)
  dir=$CACHE/rootfs-$name-$key
  if [ ! -f "$dir/.complete" ]; then
    if ! command -v debootstrap >/dev/null; then
      # As setup-docker.sh does for docker.io: root on Debian or Ubuntu installs it (.ci/run on a
      # fresh machine); anyone else is told the command.
      if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        log "installing Debian's debootstrap (apt-get)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
          { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; } ||
          { log "installing debootstrap failed: apt-get install debootstrap"; return 1; }
      else
        log "debootstrap is missing: apt-get install debootstrap"
        return 1
      fi
    fi
    log "making the $name root filesystem (debootstrap bookworm: $packages; a few minutes, once)"
    rm -rf "$dir" "$dir.tmp"
    if ! debootstrap --variant=minbase --include="$packages" bookworm "$dir.tmp" "$MIRROR" >"$CACHE/debootstrap-$name.log" 2>&1; then
      tail -n 20 "$CACHE/debootstrap-$name.log" >&2
      log "debootstrap failed (log: $CACHE/debootstrap-$name.log)"
      return 1
    fi
    # Package lists and caches are of no use in an image.
    rm -rf "$dir.tmp"/var/cache/apt/archives/*.deb "$dir.tmp"/var/lib/apt/lists/*
    mv "$dir.tmp" "$dir"
    touch "$dir/.complete"
  fi
  echo "$dir"
}

# import_dir DIR IMAGE [CHANGE...]: makes IMAGE of the directory tree DIR, one layer, with the
# Dockerfile instructions CHANGE (docker import --change: ENTRYPOINT, ENV, USER, …).
import_dir() {
  local dir=$1 image=$2 change args=()
  shift 2
  for change in "$@"; do args+=(--change "$change"); done
  # The image the tag named before is left untagged by the import: remove it, or every run
  # leaves another gigabyte behind (a developer's disk filled after a day of e2e runs).
  local before
  before=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
  tar --numeric-owner --exclude=./.complete -C "$dir" -c . | docker import "${args[@]}" - "$image" >/dev/null
  if [ -n "$before" ] && [ "$before" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
    docker image rm "$before" >/dev/null 2>&1 || true
  fi
}

# copy_with_libraries ROOTFS DEST PATH...: copies each PATH of ROOTFS (absolute inside it) into
# DEST at the same place, with the shared libraries it loads (ldd inside ROOTFS) and the loader.
copy_with_libraries() {
  local rootfs=$1 dest=$2 path lib
  shift 2
  for path in "$@"; do
    mkdir -p "$dest$(dirname "$path")"
    cp -a "$rootfs$path" "$dest$path"
    for lib in $(chroot "$rootfs" ldd "$path" | grep -o '/[^ ]*' | sort -u); do
      [ -e "$dest$lib" ] && continue
      mkdir -p "$dest$(dirname "$lib")"
      cp -L "$rootfs$lib" "$dest$lib"
    done
  done
}
