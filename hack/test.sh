#!/usr/bin/env bash
# hack/test.sh -- `make test`: everything CI runs, in two lanes at once.
#
#   first, alone:  verify-generated (it rewrites generated files, which the other lanes build from)
#   lane "checks": vet lint test-unit                 (CPU: compiles, envtest, embedded etcd; no cluster)
#   lane "cluster": test-e2e verify-bundle test-olm scorecard test-olmv1 test-nodes test-chaos
#
# The cluster lane spends most of its time waiting on the local cluster (pods starting, grace periods,
# OLM's resyncs), so the checks lane's compiles and envtests fill the cores it leaves idle instead of
# running before it. The checks lane's output goes to its own log, printed whole once it ends, so the
# two lanes' lines never interleave; `make test` fails if either lane fails, and says which.
# TEST_LANES=serial runs the same targets one after the other (what `make test` did before).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
checks=(vet lint test-unit)
cluster=(test-e2e verify-bundle test-olm scorecard test-olmv1 test-nodes test-chaos)

make --no-print-directory verify-generated || exit
# the tools both lanes need, built once here so the lanes never build one into the same place at once
make --no-print-directory envtest-assets etcd-releases minio promtool opm "$repo/bin/golangci-lint" >/dev/null || exit

if [ "${TEST_LANES:-}" = serial ]; then
  exec make --no-print-directory "${checks[@]}" "${cluster[@]}"
fi

log=$(mktemp "${TMPDIR:-/tmp}/make-test-checks.XXXXXX")
start=$(date +%s)
make --no-print-directory "${checks[@]}" >"$log" 2>&1 &
checks_pid=$!
echo "make test: lane checks (${checks[*]}) started, its log in $log; lane cluster (${cluster[*]}) follows here"

cluster_rc=0
make --no-print-directory "${cluster[@]}" || cluster_rc=$?

checks_rc=0
wait "$checks_pid" || checks_rc=$?
echo "=== make test: lane checks (${checks[*]}), exit $checks_rc:"
cat "$log"
echo "=== make test: lane checks exit $checks_rc, lane cluster exit $cluster_rc, $(($(date +%s) - start)) s after verify-generated"
[ "$checks_rc" -eq 0 ] || echo "make test: FAILED in lane checks (${checks[*]})"
[ "$cluster_rc" -eq 0 ] || echo "make test: FAILED in lane cluster (${cluster[*]})"
[ "$checks_rc" -eq 0 ] && [ "$cluster_rc" -eq 0 ]
