#!/usr/bin/env bash
# Builds the kube-apiserver and etcd that tests run against into
# bin/k8s/<kube>-etcd<etcd>/ and prints that folder on its last line. Does nothing
# when both binaries of the pinned versions are already there.
#
#   build.sh           kube-apiserver and etcd (make test)
#   build.sh kubectl   also kubectl of the same release, for the benchmarks'
#                      baselines (make bench); tests never use it
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
dest="$root/bin/k8s/${KUBE_VERSION}-etcd${ETCD_VERSION}"

want_kubectl=false
[ "${1:-}" = kubectl ] && want_kubectl=true
if [ -x "$dest/kube-apiserver" ] && [ -x "$dest/etcd" ] && { ! $want_kubectl || [ -x "$dest/kubectl" ]; }; then
  echo "testbin: kube-apiserver v${KUBE_VERSION} and etcd v${ETCD_VERSION} already built" >&2
  echo "$dest"
  exit 0
fi
mkdir -p "$dest"
build() { # name, module dir
  local start=$SECONDS
  echo "testbin: building $1 (a cold build takes a few minutes; cached afterwards)" >&2
  # -trimpath and no VCS stamping keep the build reproducible from the module cache.
  (cd "$2" && CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$dest/$1.tmp" .)
  mv "$dest/$1.tmp" "$dest/$1"
  echo "testbin: built $1 in $((SECONDS - start))s" >&2
}
[ -x "$dest/etcd" ] || build etcd "$here/etcd"
[ -x "$dest/kube-apiserver" ] || build kube-apiserver "$here/kube-apiserver"
if $want_kubectl && [ ! -x "$dest/kubectl" ]; then build kubectl "$here/kubectl"; fi
echo "$dest"
