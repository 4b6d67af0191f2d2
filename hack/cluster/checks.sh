# shellcheck shell=bash
# The check helpers of hack/cluster/verify*.sh (sourced): each check prints OK or FAIL with the time
# since T0 and the tail of what the failing command said; FAILED=1 after any failure.
T0=${T0:-${UP_T0:-$(date +%s.%N)}}
ts() { awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN{printf "%.1f", a-b}'; }
ok() { printf '[%6ss] OK   %s\n' "$(ts)" "$*"; }
fail() { printf '[%6ss] FAIL %s\n' "$(ts)" "$*"; FAILED=1; }
FAILED=0
OUT=$(mktemp); trap 'rm -f "$OUT"' EXIT
check() { local d=$1; shift; if "$@" >"$OUT" 2>&1; then ok "$d"; else fail "$d"; sed 's/^/       /' "$OUT" | tail -5; fi; }
retry() { local n=$1; shift; local i; for ((i = 0; i < n; i++)); do "$@" && return 0; sleep 1; done; "$@"; }
