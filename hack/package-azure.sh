#!/usr/bin/env bash
# `make package-azure`: every function main (functions/*/cmd/*) as an Azure Functions custom
# handler app for a Linux Function App (infra/azure): the binary built for linux/amd64 (static,
# CGO_ENABLED=0; it runs as a custom handler when the host sets FUNCTIONS_CUSTOMHANDLER_PORT) and
# named "handler", zipped by hack/azurefuncpkg with infra/azure/app/host.json and the function's
# function.json folders as dist/<function>-azure.zip, the package var.package_urls points
# WEBSITE_RUN_FROM_PACKAGE at. dist/ is git-ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
LDFLAGS="-s -w -buildid="
mkdir -p dist
for main in functions/*/cmd/*/; do
  main="${main%/}"
  fn="$(basename "$main")"
  out="dist/azure/$fn"
  mkdir -p "$out"
  echo "package-azure: $fn linux/amd64"
  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$out/handler" "./$main"
  "$GO" run ./hack/azurefuncpkg -app infra/azure/app -function "$fn" -handler "$out/handler" -o "dist/$fn-azure.zip"
done
ls -l dist/*-azure.zip
