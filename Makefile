# driftback — build, test and benchmark.
#
#   make build     build bin/driftback and bin/driftback-render (its render
#                  child for overlays)
#   make testbin   build the kube-apiserver and etcd the tests run against and
#                  helm (the render fidelity test compares with its helm
#                  template), and bring Flux's and Argo CD's CRDs into the
#                  module cache (cached)
#   make lint      the GitHub workflows, checked by actionlint (built from the
#                  Go module proxy into bin/tools)
#   make test      testbin, go vet, lint, and every test (race detector on)
#   make bench     every benchmark (builds kubectl and helm for the baselines); figures
#                  go in BENCHMARKS.md
#   make fuzz      every fuzz target for FUZZTIME each (default 30s); make
#                  test runs their seed corpora
#   make demo      the quick-start diff of the bundled demo, with the
#                  driftback on PATH, else bin/driftback
#   make image     the container image (docker build; IMAGE=... to name it);
#                  not part of make test
#   make release   a local release into dist/, as a tag's release builds it
#                  (GoReleaser in snapshot mode: binaries for linux and
#                  darwin on amd64 and arm64, archives, SBOMs, checksums, and
#                  the multi-arch image when a Docker engine runs); nothing
#                  is published
#   make publish   a tag's release, published (what .github/workflows/release.yml
#                  runs; hack/release/tag.sh makes the tag)

SHELL := /usr/bin/env bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# driftback version prints what the link stamps here.
QUICK := github.com/driftback/driftback/cmd/driftback/internal/quick
LDFLAGS := -X $(QUICK).version=$(VERSION) -X $(QUICK).commit=$(COMMIT)
TESTFLAGS ?=
# The slowest package (app, its end-to-end tests side by side) takes about
# 3 minutes on 2 cores under the race detector; the bound leaves a wide margin
# for a loaded machine without letting a hung test run for an hour.
TESTTIMEOUT ?= 30m
# End-to-end tests mostly wait (on GitHub's pace, quiet periods, polls):
# more of them run at once than there are cores.
TESTPARALLEL ?= 6
BENCHTIME ?= 3x
FUZZTIME ?= 30s
IMAGE ?= ghcr.io/driftback/driftback:$(VERSION)
# The release's tools, built from the Go module proxy into bin/tools (cached
# per version).
GORELEASER_VERSION ?= v2.15.1
CYCLONEDX_VERSION ?= v1.10.0
ACTIONLINT_VERSION ?= v1.7.12
GORELEASER := bin/tools/goreleaser@$(GORELEASER_VERSION)/goreleaser
CYCLONEDX := bin/tools/cyclonedx-gomod@$(CYCLONEDX_VERSION)/cyclonedx-gomod
ACTIONLINT := bin/tools/actionlint@$(ACTIONLINT_VERSION)/actionlint
# kustomize of the kustomize api driftback renders with: the start-up
# benchmark's baseline (kustomize version, kustomize build).
KUSTOMIZE_VERSION ?= v5.8.1
KUSTOMIZE := bin/tools/kustomize@$(KUSTOMIZE_VERSION)/kustomize

.PHONY: build testbin test vet lint bench fuzz demo image release release-tools publish clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/ ./cmd/driftback ./cmd/driftback-render

# Prints its progress on stderr and the assets folder on its last stdout line.
testbin:
	@hack/testbin/build.sh >/dev/null
	@hack/helm/build.sh >/dev/null
	@hack/testbin/crds.sh >/dev/null

vet:
	$(GO) vet ./...

# The workflows (.github/workflows), checked by actionlint.
lint: $(ACTIONLINT)
	$(ACTIONLINT) -no-color .github/workflows/*.yml

test: testbin vet lint
	@set -eo pipefail; assets=$$(hack/testbin/build.sh 2>/dev/null | tail -n1); \
	crds=$$(hack/testbin/crds.sh | tail -n1); \
	helm=$$(hack/helm/build.sh 2>/dev/null | tail -n1); \
	echo "testing with KUBEBUILDER_ASSETS=$$assets"; \
	KUBEBUILDER_ASSETS=$$assets DRIFTBACK_RECONCILER_CRDS=$$crds DRIFTBACK_HELM=$$helm $(GO) test -race -count=1 -timeout $(TESTTIMEOUT) -parallel $(TESTPARALLEL) $(TESTFLAGS) ./... && \
	echo "render limits without the race detector (the memory limit as shipped):" && \
	KUBEBUILDER_ASSETS=$$assets $(GO) test -count=1 -run 'TestHostileInput|TestChild' ./render

# kubectl, built from the same release, is the baselines' (kubectl kustomize,
# kubectl diff --server-side); it is put on PATH for the benchmarks only.
# helm, of the Helm SDK's version, is the chart render's (helm template);
# kustomize, of the kustomize api's, the start-up's.
bench: testbin $(KUSTOMIZE)
	@assets=$$(hack/testbin/build.sh kubectl | tail -n1); \
	helm=$$(hack/helm/build.sh | tail -n1); \
	PATH=$$assets:$(CURDIR)/$(dir $(KUSTOMIZE)):$$PATH KUBEBUILDER_ASSETS=$$assets DRIFTBACK_HELM=$$helm $(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem -timeout 90m ./...

# Each fuzz target on its own (go test -fuzz takes one at a time). A failing
# input is written under the package's testdata/fuzz/ and fails make test
# from then on: commit it with the fix.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$target for $(FUZZTIME)"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# The demo runs the driftback on PATH (a release), else bin/driftback, built
# from source the first time. Exit status 1 is "changes", as kubectl diff's.
demo:
	@bin=$$(command -v driftback || true); \
	if [ -z "$$bin" ]; then \
	  [ -x bin/driftback ] || echo "demo: no driftback on PATH: building bin/driftback from source (the first build compiles parts of Kubernetes: about 25 minutes on 2 cores)" >&2; \
	  $(MAKE) --no-print-directory build >&2 || exit 2; \
	  bin=bin/driftback; \
	fi; \
	echo "demo: $$bin ($$($$bin version | head -n1))" >&2; \
	$$bin diff --base fixtures/demo/base --head fixtures/demo/pr --live fixtures/demo/live || [ $$? -eq 1 ]

image:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

$(GORELEASER):
	GOBIN=$(CURDIR)/$(@D) $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)

$(CYCLONEDX):
	GOBIN=$(CURDIR)/$(@D) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_VERSION)

$(KUSTOMIZE):
	GOBIN=$(CURDIR)/$(@D) $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)

$(ACTIONLINT):
	GOBIN=$(CURDIR)/$(@D) $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

release-tools: $(GORELEASER) $(CYCLONEDX)

# A tag's release (.github/workflows/release.yml): published on GitHub and
# ghcr.io; needs GITHUB_TOKEN and a Docker engine with buildx.
publish: release-tools
	PATH=$(CURDIR)/$(dir $(CYCLONEDX)):$$PATH $(GORELEASER) release --clean

# Without a Docker engine (docker info fails) the image is left out, and
# says so; everything else is built.
release: $(GORELEASER) $(CYCLONEDX)
	@skip=; if ! docker info >/dev/null 2>&1; then skip=--skip=docker; 	  echo "release: no Docker engine answers: the image is not built"; fi; 	PATH=$(CURDIR)/$(dir $(CYCLONEDX)):$$PATH $(GORELEASER) release --snapshot --clean $$skip

clean:
	rm -rf bin dist
