#!/usr/bin/env bash
# Debian packages the project uses beyond Python (installed where missing; never fatal).
#   chromium-headless-shell  the report's browser test (tests/harness/test_report_browser.py)
#   busybox-static           NitroBox's offline root file system
#   bubblewrap               NitroBox's one-shot sandbox baseline
#   libseccomp2              libseccomp, which NitroBox's seccomp binding (pyseccomp, the `systems` extra) loads
# With --full (make full) also:
#   docker.io                NitroBox's full-mode Docker baseline (a private dockerd; no test uses it)
# Tests that need a package skip with a reason when it could not be installed.
set -u
PACKAGES=(chromium-headless-shell busybox-static bubblewrap libseccomp2)
[ "${1:-}" = --full ] && PACKAGES+=(docker.io)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "system-packages: not root or no apt-get; missing: ${missing[*]} (dependent tests will skip)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
    || echo "system-packages: could not install ${missing[*]} (dependent tests will skip)" >&2
fi
exit 0
