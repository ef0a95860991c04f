#!/bin/sh
# Generate ./configure from configure.ac (needs autoconf, automake, pkg-config).
set -e
cd "$(dirname "$0")"
mkdir -p m4
autoreconf -fi
