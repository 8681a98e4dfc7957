#!/usr/bin/env bash
# Builds helm, of the version of the Helm SDK driftback renders charts with,
# from the Go module proxy into bin/helm/<version>/ and prints that folder on
# its last line. Does nothing when it is already there. The render fidelity
# test compares driftback's renders with its `helm template`; the benchmarks
# time it as their baseline.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=$(awk '$1 == "helm.sh/helm/v4" {print $2}' "$root/go.mod")
pinned=$(awk '$1 == "helm.sh/helm/v4" {print $2}' "$here/go.mod")
if [ "$version" != "$pinned" ]; then
  echo "helm: driftback uses helm.sh/helm/v4 $version but hack/helm/go.mod builds $pinned: make them the same (then go mod tidy there)" >&2
  exit 1
fi
dest="$root/bin/helm/$version"
if [ -x "$dest/helm" ]; then
  echo "helm: $version already built" >&2
  echo "$dest"
  exit 0
fi
mkdir -p "$dest"
start=$SECONDS
echo "helm: building helm $version (a cold build takes a few minutes; cached afterwards)" >&2
(cd "$here" && CGO_ENABLED=0 go build -trimpath -buildvcs=false \
  -ldflags "-X helm.sh/helm/v4/internal/version.version=$version" -o "$dest/helm.tmp" helm.sh/helm/v4/cmd/helm)
mv "$dest/helm.tmp" "$dest/helm"
echo "helm: built helm $version in $((SECONDS - start))s" >&2
echo "$dest"
