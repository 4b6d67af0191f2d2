#!/usr/bin/env bash
# hack/test.sh -- `make test`: everything CI runs, in two lanes.
#
#   first, alone:  verify-generated (it rewrites generated files, which the other lanes build from)
#   lane "cluster": test-e2e verify-bundle test-olm scorecard test-olmv1 test-release test-nodes test-chaos
#   lane "checks":  vet lint test-unit                (CPU: compiles, envtest, embedded etcd; no cluster)
#
# The checks lane starts when the cluster lane's e2e suite and verify-bundle have ended. The e2e suite
# runs several clusters at once and is bound by the CPU (two cores here), so the checks lane's compiles
# beside it only slowed it; the OLM suites that follow mostly wait on the cluster (OLM's resyncs, pods
# starting), and the checks lane (about 7 minutes alone) fills the cores they leave idle, ending well
# before the node suite. Not before verify-bundle: `make bundle` rewrites bundle/ and community/, which
# test/bundle and test/community read.
# The checks lane's output goes to its own log, printed whole once it ends, so the two lanes' lines
# never interleave; `make test` fails if either lane fails, and says which. The cluster lane's lines are
# also kept with the second each appeared, and the milestones (each go test started and ended, the
# cluster grown, the checks lane started) are printed at the end with their offsets: a run that grows
# says where.
# TEST_LANES=serial runs the same targets one after the other (what `make test` did before).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
checks=(vet lint test-unit)
cluster_first=(test-e2e verify-bundle)
cluster=(test-olm scorecard test-olmv1 test-release test-nodes test-chaos)

make --no-print-directory verify-generated || exit
# the tools both lanes need, built once here so the lanes never build one into the same place at once
make --no-print-directory envtest-assets etcd-releases minio promtool opm crane "$repo/bin/golangci-lint" >/dev/null || exit

if [ "${TEST_LANES:-}" = serial ]; then
  exec make --no-print-directory "${checks[@]}" "${cluster_first[@]}" "${cluster[@]}"
fi

log=$(mktemp "${TMPDIR:-/tmp}/make-test-checks.XXXXXX")
start=$(date +%s)
echo "make test: lane cluster (${cluster_first[*]} ${cluster[*]}) runs here; lane checks (${checks[*]}) starts after ${cluster_first[*]}, its log in $log"

# stamped FILE: pass stdin through, and keep each line in FILE after the second it arrived
stamped() { local l; while IFS= read -r l || [ -n "$l" ]; do printf '%s\n' "$l"; printf '%(%s)T %s\n' -1 "$l" >>"$1"; done; }
timeline=$(mktemp "${TMPDIR:-/tmp}/make-test-timeline.XXXXXX")
make --no-print-directory "${cluster_first[@]}" 2>&1 | stamped "$timeline"
cluster_rc=${PIPESTATUS[0]}
make --no-print-directory "${checks[@]}" >"$log" 2>&1 &
checks_pid=$!
echo "make test: lane checks started" | stamped "$timeline"
if [ "$cluster_rc" -eq 0 ]; then
  make --no-print-directory "${cluster[@]}" 2>&1 | stamped "$timeline"
  cluster_rc=${PIPESTATUS[0]}
fi

checks_rc=0
wait "$checks_pid" || checks_rc=$?
echo "=== make test: lane checks (${checks[*]}), exit $checks_rc:"
cat "$log"
echo "=== make test: lane checks exit $checks_rc, lane cluster exit $cluster_rc, $(($(date +%s) - start)) s after verify-generated"
echo "=== make test: lane cluster's milestones (seconds after the lane started; all its lines with times in $timeline):"
grep -E '^[0-9]+ (.*go test |ok |FAIL|make cluster-up|make test: lane checks started|.*scorecard passed|olm-install: packageserver Succeeded)' "$timeline" |
  cut -c1-160 | awk -v t0="$start" '{ $1 = sprintf("%5d s", $1 - t0); print }'
[ "$checks_rc" -eq 0 ] || echo "make test: FAILED in lane checks (${checks[*]})"
[ "$cluster_rc" -eq 0 ] || echo "make test: FAILED in lane cluster (${cluster_first[*]} ${cluster[*]})"
[ "$checks_rc" -eq 0 ] && [ "$cluster_rc" -eq 0 ]
