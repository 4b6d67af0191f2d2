# The operator image, for users with Docker or another builder. The local cluster builds the
# same layout without a daemon: hack/images/build.sh (make images / make cluster-load).
# Multi-platform, like the published image (linux/amd64 and linux/arm64, the CSV's arch labels):
#   docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/etcd-autopilot:<tag> --push .
# The builder stage runs on the build machine's platform and cross-compiles (CGO_ENABLED=0), so no
# emulation is needed.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
# only the sources (not bin/ or the local cluster's .cluster/)
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
# the monitoring objects the manager creates at run time (config/prometheus/embed.go)
COPY config/prometheus/ config/prometheus/
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w" -o manager ./cmd/manager && \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags "-s -w" -o worker ./cmd/worker

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager /manager
COPY --from=builder /workspace/worker /worker
USER 65532:65532
ENTRYPOINT ["/manager"]
