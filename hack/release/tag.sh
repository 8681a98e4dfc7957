#!/usr/bin/env bash
# Tags a release: writes the version into the Action's tree
# (hack/action/version, what the Action installs when it runs from that
# tag: a composite action is not told its own ref), commits and tags it,
# then sets the branch back to "devel" (an Action run from a branch builds
# its own source). Pushing the tag runs .github/workflows/release.yml.
#
#   hack/release/tag.sh v0.4.0 && git push origin main v0.4.0
set -euo pipefail
version="${1:-}"
if [[ ! "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "usage: hack/release/tag.sh vX.Y.Z" >&2
  exit 2
fi
cd "$(dirname "$0")/../.."
if [[ -n "$(git status --porcelain)" ]]; then
  echo "tag.sh: the working tree has changes: commit them first" >&2
  exit 2
fi
if ! grep -q "^## ${version}" CHANGELOG.md; then
  echo "tag.sh: CHANGELOG.md has no section \"## ${version}\": write what the release changes first" >&2
  exit 2
fi
printf '%s\n' "$version" >hack/action/version
git commit -q -m "Release ${version}" hack/action/version
git tag -a -m "driftback ${version}" "$version"
printf 'devel\n' >hack/action/version
git commit -q -m "Back to development after ${version}" hack/action/version
echo "tagged ${version}; push it: git push origin HEAD ${version}"
