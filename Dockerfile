# syntax=docker/dockerfile:1
#
# driftback's image: its static binaries (driftback, and driftback-render, the
# render child for overlays) on distroless, running as nonroot.
# From source (the last stage, the default):
#   docker build --build-arg VERSION=v0.1.0 --build-arg COMMIT=$(git rev-parse HEAD) -t ghcr.io/driftback/driftback:v0.1.0 .
# or `make image`. The release (GoReleaser, `make release`) builds the
# `release` stage instead, from the binaries it has built for each platform.

# The build runs on the builder's own platform and cross-compiles for the
# target's (TARGETOS/TARGETARCH are set by BuildKit; empty means the builder's).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X github.com/driftback/driftback/cmd/driftback/internal/quick.version=${VERSION} -X github.com/driftback/driftback/cmd/driftback/internal/quick.commit=${COMMIT}" \
      -o /out/ ./cmd/driftback ./cmd/driftback-render

# No shell, no package manager: the render children are /driftback-render
# (overlays) and /driftback re-executed (charts), and they need nothing else.
FROM gcr.io/distroless/static-debian12:nonroot AS release
ARG TARGETPLATFORM
COPY $TARGETPLATFORM/driftback $TARGETPLATFORM/driftback-render /
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/driftback"]
CMD ["serve", "--config", "/etc/driftback/app.yml"]

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/driftback /out/driftback-render /
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/driftback"]
CMD ["serve", "--config", "/etc/driftback/app.yml"]
