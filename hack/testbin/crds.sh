#!/usr/bin/env bash
# Brings the Flux and Argo CD modules pinned in versions.env into the Go module
# cache (once; cached afterwards) and prints, on its last stdout line, the
# CustomResourceDefinition files of theirs that the tests install, separated
# by ':'. The files are read where the module cache keeps them: nothing is
# copied into the repository.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# Outside any module, so go.mod is neither read nor changed.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
dir() { # module@version
  local out
  out=$(GOFLAGS=-mod=mod go mod download -json "$1") || { echo "testbin: cannot download $1: $out" >&2; exit 1; }
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$out"
}
echo "testbin: reconciler CRDs from the module cache" >&2
kc=$(dir "github.com/fluxcd/kustomize-controller@${FLUX_KUSTOMIZE_CONTROLLER}")
sc=$(dir "github.com/fluxcd/source-controller@${FLUX_SOURCE_CONTROLLER}")
argo=$(dir "github.com/argoproj/argo-cd/v3@${ARGOCD}")
files=(
  "$kc/config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"
  "$sc/config/crd/bases/source.toolkit.fluxcd.io_gitrepositories.yaml"
  "$sc/config/crd/bases/source.toolkit.fluxcd.io_ocirepositories.yaml"
  "$sc/config/crd/bases/source.toolkit.fluxcd.io_buckets.yaml"
  "$sc/config/crd/bases/source.toolkit.fluxcd.io_helmrepositories.yaml"
  "$sc/config/crd/bases/source.toolkit.fluxcd.io_externalartifacts.yaml"
  "$argo/manifests/crds/application-crd.yaml"
  "$argo/manifests/crds/appproject-crd.yaml"
)
for f in "${files[@]}"; do
  [ -s "$f" ] || { echo "testbin: $f is missing from the module" >&2; exit 1; }
done
(IFS=:; echo "${files[*]}")
