#!/usr/bin/env bash
# install_deps_test.sh - tools/install-deps against a fake apt-get (on PATH, with fake
# dpkg-query, sudo and debconf-set-selections, so nothing is installed):
#   1. apt's lock is held for the first two tries: it waits and then installs;
#   2. the lock is never released: it gives up after APT_LOCK_WAIT with a message;
#   3. another apt error: it fails at once, without retrying.
set -u
cd "$(dirname "$0")/../.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/bin"
# Every package is installed except kmod.
cat > "$dir/bin/dpkg-query" <<'EOS'
#!/bin/sh
for a; do last=$a; done
[ "$last" = kmod ] && exit 1
printf 'install ok installed'
EOS
# FAKE_MODE: locked-twice | locked | broken. Calls are logged to $FAKE_LOG.
cat > "$dir/bin/apt-get" <<'EOS'
#!/bin/sh
echo "$*" >> "$FAKE_LOG"
n=$(wc -l < "$FAKE_LOG")
case "$FAKE_MODE" in
  locked-twice) [ "$n" -le 2 ] && { echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2; exit 100; } ;;
  locked) echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2; exit 100 ;;
  broken) echo "E: Unable to locate package kmod" >&2; exit 100 ;;
esac
exit 0
EOS
printf '#!/bin/sh\nexec "$@"\n' > "$dir/bin/sudo"
printf '#!/bin/sh\ncat >/dev/null\n' > "$dir/bin/debconf-set-selections"
chmod +x "$dir"/bin/*
export PATH="$dir/bin:$PATH" FAKE_LOG="$dir/calls" APT_LOCK_POLL=0.1
fails=0
check() { # check NAME CONDITION...
  if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; fails=$((fails + 1)); fi
}

: > "$FAKE_LOG"
FAKE_MODE=locked-twice APT_LOCK_WAIT=30 tools/install-deps > "$dir/out" 2>&1
rc=$?
check "waits for the lock, then installs (exit $rc)" [ $rc -eq 0 ]
check "update tried three times, then install" \
  [ "$(grep -c '^-o DPkg::Lock::Timeout=[0-9]* update' "$FAKE_LOG")" -eq 3 ]
check "installs the missing package" grep -q "install .*kmod" "$FAKE_LOG"
check "says it is waiting" grep -q 'holds the lock; waiting' "$dir/out"

: > "$FAKE_LOG"
t0=$SECONDS
FAKE_MODE=locked APT_LOCK_WAIT=1 tools/install-deps > "$dir/out" 2>&1
rc=$?
check "gives up when the lock stays held (exit $rc)" [ $rc -ne 0 ]
check "within the bound ($((SECONDS - t0)) s)" [ $((SECONDS - t0)) -le 10 ]
check "says why" grep -q 'still locked by another process after 1 s' "$dir/out"

: > "$FAKE_LOG"
FAKE_MODE=broken APT_LOCK_WAIT=30 tools/install-deps > "$dir/out" 2>&1
rc=$?
check "another apt error fails (exit $rc)" [ $rc -ne 0 ]
check "at once, without a retry" [ "$(wc -l < "$FAKE_LOG")" -eq 1 ]
[ $fails -eq 0 ]
