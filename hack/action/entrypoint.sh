#!/usr/bin/env bash
# The driftback Action's entry point (action.yml): installs the driftback
# release, then runs `driftback diff --publish` on the workflow's pull request
# in the checked-out repository ($GITHUB_WORKSPACE).
#
# DRIFTBACK_BIN, when set, is the driftback binary to run instead of a
# release (for tests, or a binary the workflow built).
set -euo pipefail

say() { echo "driftback action: $*" >&2; }

# install_release installs a release it can verify, never on the word of
# the release's own checksums file (a release whose files were replaced, by
# a stolen token or a moved tag, would bring a matching one): its archive
# must have the digest this Action's tree pins for it
# (hack/action/checksums.txt), or, for a release pinned nowhere (the
# Action's own tag cannot pin what is built from it), the build provenance
# the release workflow signed must verify with `gh attestation verify`.
install_release() {
  local version="$1" os arch archive url dir pinned want got
  os="$(uname -s | tr '[:upper:]' '[:lower:]')"
  case "$(uname -m)" in
    x86_64 | amd64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) say "no release for $(uname -m)"; exit 2 ;;
  esac
  archive="driftback_${os}_${arch}.tar.gz"
  pinned="${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/../.." && pwd)}/hack/action/checksums.txt"
  want="$(awk -v f="${version}/${archive}" '$2 == f { print $1 }' "$pinned" 2>/dev/null || true)"
  if [[ -z "$want" ]] && ! command -v gh >/dev/null; then
    say "driftback ${version} has no digest pinned in this Action, and gh, which verifies a release's signed provenance, is not on the runner: not installed (set DRIFTBACK_BIN to a binary the workflow built)"
    exit 2
  fi
  url="${DRIFTBACK_RELEASES_URL:-https://github.com/driftback/driftback/releases/download}/${version}"
  dir="${RUNNER_TEMP:-/tmp}/driftback-${version}"
  mkdir -p "$dir"
  say "installing driftback ${version} (${os}/${arch})"
  curl -fsSL --retry 3 -o "$dir/$archive" "$url/$archive"
  if [[ -n "$want" ]]; then
    if command -v sha256sum >/dev/null; then
      got="$(sha256sum "$dir/$archive" | awk '{ print $1 }')"
    else
      got="$(shasum -a 256 "$dir/$archive" | awk '{ print $1 }')" # macOS runners
    fi
    if [[ "$got" != "$want" ]]; then
      say "the release's ${archive} has digest ${got}, not the ${want} this Action pins: not installed"
      exit 2
    fi
  elif ! GH_TOKEN="${GH_TOKEN:-${GITHUB_TOKEN:-}}" gh attestation verify "$dir/$archive" --repo driftback/driftback \
    --signer-workflow driftback/driftback/.github/workflows/release.yml >&2; then
    say "the release's ${archive} has no provenance signed by driftback's release workflow: not installed"
    exit 2
  fi
  tar -xzf "$dir/$archive" -C "$dir" driftback
  # driftback-render, its render child for overlays, where the release has it
  # (never one left there before).
  rm -f "$dir/driftback-render"
  tar -xzf "$dir/$archive" -C "$dir" driftback-render 2>/dev/null || true
  DRIFTBACK_BIN="$dir/driftback"
}

# The Action's own version is in its files (hack/action/version, which the
# release writes into the tagged tree): a composite action is not told its
# ref (GITHUB_ACTION_REF is empty there).
action_dir="${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/../.." && pwd)}"
if [[ -z "${DRIFTBACK_BIN:-}" ]]; then
  version="${INPUT_VERSION:-}"
  [[ -n "$version" ]] || version="$(tr -d '[:space:]' <"$action_dir/hack/action/version" 2>/dev/null || true)"
  if [[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    install_release "$version"
  elif [[ "$version" == latest ]]; then
    say "version: latest is not a version: name a release tag (vX.Y.Z) or a commit"
    exit 2
  elif [[ -n "${INPUT_VERSION:-}" ]]; then
    # A commit or branch asked for by name: built from the module proxy.
    say "building driftback at ${version} with go install (a release tag installs in seconds)"
    GOBIN="${RUNNER_TEMP:-/tmp}/driftback-src" go install "github.com/driftback/driftback/cmd/...@${version}"
    DRIFTBACK_BIN="${RUNNER_TEMP:-/tmp}/driftback-src/driftback"
  else
    # Not a release (a branch or commit of the Action): its own source.
    say "this Action is not a release (hack/action/version says ${version:-nothing}): building driftback from its own source (a release tag installs in seconds)"
    # Stamped with the build's time: a build outside version control that
    # names nothing is never paired with its render child, driftback-render.
    stamp="${version:-devel}-source.$(date -u +%Y%m%dT%H%M%SZ)"
    (cd "$action_dir" && go build -ldflags "-X github.com/driftback/driftback/cmd/driftback/internal/quick.version=${stamp}" \
      -o "${RUNNER_TEMP:-/tmp}/driftback-src/" ./cmd/driftback ./cmd/driftback-render)
    DRIFTBACK_BIN="${RUNNER_TEMP:-/tmp}/driftback-src/driftback"
  fi
fi

cd "${GITHUB_WORKSPACE:-.}"
if [[ "$(git rev-parse --is-shallow-repository)" == true ]]; then
  # The pull request's base and head commits are compared from history.
  say "the checkout is shallow: fetching its history (fetch-depth: 0 on actions/checkout saves this step)"
  git fetch --quiet --no-tags --unshallow origin
fi
report="${RUNNER_TEMP:-/tmp}/driftback-report.json"
args=(diff --repo . --publish --format markdown --report-file "$report" --ack-label "${INPUT_ACK_LABEL:-driftback/allow-danger}")

if [[ -n "${INPUT_KUBECONFIG:-}" ]]; then
  # The credentials live in a file only this job can read, removed on exit.
  kubeconfig="$(mktemp "${RUNNER_TEMP:-/tmp}/kubeconfig.XXXXXX")"
  trap 'rm -f "$kubeconfig"' EXIT
  chmod 600 "$kubeconfig"
  printf '%s\n' "$INPUT_KUBECONFIG" >"$kubeconfig"
  args+=(--kubeconfig "$kubeconfig")
  [[ -z "${INPUT_CONTEXT:-}" ]] || args+=(--context "$INPUT_CONTEXT")
fi
set -f # the inputs' words are flags, never file patterns
while IFS= read -r path; do
  [[ -z "$path" ]] || args+=(--path "$path")
done <<<"${INPUT_PATHS:-}"
for danger in ${INPUT_FAIL_ON//,/ }; do
  args+=(--fail-on "$danger")
done
# shellcheck disable=SC2206 # extra flags are split on spaces, as documented
extra=(${INPUT_ARGS:-})
args+=("${extra[@]}")

# The step's output is the report; the comment and the check run carry it
# to the pull request, the step summary and outputs to the workflow (a
# fork's read-only token: the step summary alone). Exit 1: the check fails
# on a danger; 2: an error.
"$DRIFTBACK_BIN" "${args[@]}"
