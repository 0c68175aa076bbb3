#!/usr/bin/env bash
# `make package`: every function main (functions/*/cmd/*) cross-compiled as Lambda's
# "bootstrap" for provided.al2023 on arm64 and amd64 (static, CGO_ENABLED=0, -tags lambda.norpc:
# the runtime speaks only the Runtime API), zipped as dist/<function>-<arch>.zip; and the agent
# as static binaries dist/agent-linux-<arch> for agent/Containerfile. dist/ is git-ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
ARCHES="${ARCHES:-arm64 amd64}"
LDFLAGS="-s -w -buildid="
mkdir -p dist
for main in functions/*/cmd/*/; do
  main="${main%/}"
  fn="$(basename "$main")"
  for arch in $ARCHES; do
    out="dist/$fn/$arch"
    mkdir -p "$out"
    echo "package: $fn linux/$arch"
    CGO_ENABLED=0 GOOS=linux GOARCH="$arch" "$GO" build -trimpath -tags lambda.norpc \
      -ldflags "$LDFLAGS" -o "$out/bootstrap" "./$main"
    "$GO" run ./hack/lambdazip -o "dist/$fn-$arch.zip" "$out/bootstrap"
  done
done
for arch in $ARCHES; do
  echo "package: agent linux/$arch"
  CGO_ENABLED=0 GOOS=linux GOARCH="$arch" "$GO" build -trimpath -ldflags "$LDFLAGS" \
    -o "dist/agent-linux-$arch" ./agent/cmd/agent
done
ls -l dist/*.zip dist/agent-linux-*
