#!/usr/bin/env bash
# Render a report in headless Chromium and save a PNG: scripts/screenshot.sh RUN/report/report.html OUT.png [HEIGHT]
# Needs Debian's chromium (apt-get install -y chromium). Flags keep it off the network.
set -euo pipefail
html=$(realpath "$1"); out=$(realpath -m "$2"); height=${3:-2400}
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$profile" --hide-scrollbars \
  --window-size=1200,"$height" --screenshot="$out" "file://$html" 2>/dev/null
echo "wrote $out"
