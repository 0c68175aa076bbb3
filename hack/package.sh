#!/usr/bin/env bash
# `make package`: every function main (functions/*/cmd/*) cross-compiled as Lambda's
# "bootstrap" for provided.al2023 on arm64 and amd64 (static, CGO_ENABLED=0, -tags $LAMBDA_TAGS:
# lambda.norpc, the runtime speaking only the Runtime API and the build leaving out the NATS and
# Azure Functions modes; -gcflags $LAMBDA_GCFLAGS), zipped as dist/<function>-<arch>.zip,
# each bootstrap's size reported and held under $MAX_BOOTSTRAP_BYTES (20 MB: a smaller bootstrap
# loads faster on a cold start); the same mains as NATS workers (dist/<function>-linux-<arch>,
# functions/Containerfile); and the agent and the Scheduled Events publisher as static binaries
# (dist/agent-linux-<arch>, dist/scheduled-events-linux-<arch>, agent/Containerfile).
# dist/ is git-ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
ARCHES="${ARCHES:-arm64 amd64}"
LAMBDA_TAGS="${LAMBDA_TAGS:-lambda.norpc}"
# The bootstrap's AWS SDK code is compiled without inlining: it waits on the network, and
# inlining its generated serializers and middleware costs 1.1 MB (amd64) of the size budget.
LAMBDA_GCFLAGS="${LAMBDA_GCFLAGS:-github.com/aws/...=-l}"
MAX_BOOTSTRAP_BYTES="${MAX_BOOTSTRAP_BYTES:-20000000}"
LDFLAGS="-s -w -buildid="
mkdir -p dist
build() { # build GOARCH OUT PKG [TAGS [GCFLAGS]]
  CGO_ENABLED=0 GOOS=linux GOARCH="$1" "$GO" build -trimpath -tags "${4:-}" -gcflags "${5:-}" -ldflags "$LDFLAGS" -o "$2" "./$3"
}
report=()
over=0
for main in functions/*/cmd/*/; do
  main="${main%/}"
  fn="$(basename "$main")"
  for arch in $ARCHES; do
    out="dist/$fn/$arch"
    mkdir -p "$out"
    echo "package: $fn linux/$arch (Lambda bootstrap, -tags $LAMBDA_TAGS -gcflags $LAMBDA_GCFLAGS; NATS worker)"
    build "$arch" "$out/bootstrap" "$main" "$LAMBDA_TAGS" "$LAMBDA_GCFLAGS"
    "$GO" run ./hack/lambdazip -o "dist/$fn-$arch.zip" "$out/bootstrap"
    build "$arch" "dist/$fn-linux-$arch" "$main"
    size=$(stat -c %s "$out/bootstrap")
    zip=$(stat -c %s "dist/$fn-$arch.zip")
    report+=("$(awk -v f="$fn" -v a="$arch" -v s="$size" -v z="$zip" 'BEGIN { printf "%-13s %-6s %10d %8.2f MB %8.2f MB", f, a, s, s/1e6, z/1e6 }')")
    if [ "$size" -ge "$MAX_BOOTSTRAP_BYTES" ]; then over=1; fi
  done
done
for arch in $ARCHES; do
  echo "package: agent and scheduled-events linux/$arch"
  build "$arch" "dist/agent-linux-$arch" agent/cmd/agent
  build "$arch" "dist/scheduled-events-linux-$arch" agent/cmd/scheduled-events
done
echo
echo "Lambda bootstraps (limit $MAX_BOOTSTRAP_BYTES bytes):"
printf '%-13s %-6s %10s %11s %11s\n' function arch bytes bootstrap zip
printf '%s\n' "${report[@]}"
if [ "$over" -ne 0 ]; then
  echo "package: a bootstrap is $MAX_BOOTSTRAP_BYTES bytes or more" >&2
  exit 1
fi
