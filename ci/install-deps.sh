#!/bin/sh
# Install the Debian packages nimfactory builds and tests with, when missing.
# Run as root on Debian 12; does nothing when everything is present.
set -eu

PACKAGES="build-essential pkg-config perl clang libclang-rt-14-dev
libyaml-dev libjansson-dev libarchive-dev libcurl4-openssl-dev libgit2-dev
libssl-dev libpcre2-dev libunistring-dev libzstd-dev zlib1g-dev libmicrohttpd-dev libdeflate-dev
umoci skopeo docker-registry prometheus python3 python3-venv curl ca-certificates faketime"

missing=""
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "install-deps: installing:$missing"
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: not root; run: sudo apt-get install$missing" >&2
	exit 4
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing
