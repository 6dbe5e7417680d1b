#!/bin/sh
set -eu
echo "preview of $1"
