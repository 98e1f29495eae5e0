# The operator image: two static binaries, the manager and the /v1 apiserver sidecar, on
# distroless (no shell, no package manager), running as the distroless non-root user.
# The reference worker needs ffmpeg and has its own image: Dockerfile.worker.

# Build on the builder's own platform and cross-compile: no emulation for multi-arch images.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH

WORKDIR /workspace
# Modules first, so a source change does not invalidate the download layer.
COPY go.mod go.sum ./
RUN go mod download

COPY . .
RUN for cmd in manager apiserver; do \
      CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
      go build -trimpath -ldflags='-s -w' -o /out/$cmd ./cmd/$cmd || exit 1; \
    done

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /out/manager /out/apiserver /
USER 65532:65532

ENTRYPOINT ["/manager"]
