# driftback — build, test and benchmark.
#
#   make build     build bin/driftback
#   make testbin   build the kube-apiserver and etcd the tests run against (cached)
#   make test      testbin, go vet, and every test (race detector on)
#   make bench     every benchmark; figures go in BENCHMARKS.md
#   make demo      the quick-start diff of the bundled demo
#   make image     the container image (docker build; IMAGE=... to name it);
#                  not part of make test

SHELL := /usr/bin/env bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
TESTFLAGS ?=
BENCHTIME ?= 3x
IMAGE ?= ghcr.io/driftback/driftback:$(VERSION)

.PHONY: build testbin test vet bench demo image clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/driftback ./cmd/driftback

# Prints its progress on stderr and the assets folder on its last stdout line.
testbin:
	@hack/testbin/build.sh >/dev/null

vet:
	$(GO) vet ./...

test: testbin vet
	@assets=$$(hack/testbin/build.sh 2>/dev/null | tail -n1); \
	echo "testing with KUBEBUILDER_ASSETS=$$assets"; \
	KUBEBUILDER_ASSETS=$$assets $(GO) test -race -count=1 $(TESTFLAGS) ./... && \
	echo "render limits without the race detector (the memory limit as shipped):" && \
	KUBEBUILDER_ASSETS=$$assets $(GO) test -count=1 -run 'TestHostileInput|TestChild' ./render

bench: testbin
	@assets=$$(hack/testbin/build.sh 2>/dev/null | tail -n1); \
	KUBEBUILDER_ASSETS=$$assets $(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -benchmem ./...

demo:
	$(GO) run ./cmd/driftback diff --base fixtures/demo/base --head fixtures/demo/pr --live fixtures/demo/live || [ $$? -eq 1 ]

image:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

clean:
	rm -rf bin
