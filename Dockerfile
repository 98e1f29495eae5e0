# One image, two binaries: the manager and the /v1 apiserver sidecar. Static, distroless,
# non-root.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH

WORKDIR /workspace
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
