#!/bin/sh
# unsupported.sh - stands in for Bazel's downloaded coverage tools; refuses loudly.
echo "rrpc: 'bazel coverage' is not supported in the offline build (no coverage tools)" >&2
exit 1
