#!/usr/bin/env bash
# hack/test.sh -- `make test`: everything CI runs, in two lanes at once.
#
#   first, alone:  verify-generated (it rewrites generated files, which the other lanes build from)
#   lane "checks": vet lint test-unit                 (CPU: compiles, envtest, embedded etcd; no cluster)
#   lane "cluster": test-e2e verify-bundle test-olm scorecard test-olmv1 test-release test-nodes test-chaos
#
# The cluster lane spends most of its time waiting on the local cluster (pods starting, grace periods,
# OLM's resyncs), so the checks lane's compiles and envtests fill the cores it leaves idle instead of
# running before it. The checks lane's output goes to its own log, printed whole once it ends, so the
# two lanes' lines never interleave; `make test` fails if either lane fails, and says which. The cluster
# lane's lines are also kept with the second each appeared, and the milestones (each go test started and
# ended, the cluster grown) are printed at the end with their offsets: a run that grows says where.
# TEST_LANES=serial runs the same targets one after the other (what `make test` did before).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
checks=(vet lint test-unit)
cluster=(test-e2e verify-bundle test-olm scorecard test-olmv1 test-release test-nodes test-chaos)

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

# stamped FILE: pass stdin through, and keep each line in FILE after the second it arrived
stamped() { local l; while IFS= read -r l || [ -n "$l" ]; do printf '%s\n' "$l"; printf '%(%s)T %s\n' -1 "$l" >>"$1"; done; }
timeline=$(mktemp "${TMPDIR:-/tmp}/make-test-timeline.XXXXXX")
make --no-print-directory "${cluster[@]}" 2>&1 | stamped "$timeline"
cluster_rc=${PIPESTATUS[0]}

checks_rc=0
wait "$checks_pid" || checks_rc=$?
echo "=== make test: lane checks (${checks[*]}), exit $checks_rc:"
cat "$log"
echo "=== make test: lane checks exit $checks_rc, lane cluster exit $cluster_rc, $(($(date +%s) - start)) s after verify-generated"
echo "=== make test: lane cluster's milestones (seconds after the lane started; all its lines with times in $timeline):"
grep -E '^[0-9]+ (.*go test |ok |FAIL|make cluster-up|.*scorecard passed|olm-install: packageserver Succeeded)' "$timeline" |
  cut -c1-160 | awk -v t0="$start" '{ $1 = sprintf("%5d s", $1 - t0); print }'
[ "$checks_rc" -eq 0 ] || echo "make test: FAILED in lane checks (${checks[*]})"
[ "$cluster_rc" -eq 0 ] || echo "make test: FAILED in lane cluster (${cluster[*]})"
[ "$checks_rc" -eq 0 ] && [ "$cluster_rc" -eq 0 ]
