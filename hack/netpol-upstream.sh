#!/usr/bin/env bash
# hack/netpol-upstream.sh [E2E_ARGS...] -- the upstream Kubernetes NetworkPolicy e2e tests (k8s.io/kubernetes
# v1.34.4 test/e2e/network/netpol) against whatever enforces NetworkPolicy on the running local cluster
# (hack/tools/netpol as up.sh starts it); `make test-netpol-upstream`. See docs/dev/netpol-conformance.md.
#
#   1. builds bin/e2e.test and bin/agnhost (hack/tools/build.sh e2e-test: cached by version, like every tool)
#   2. loads the agnhost image into every node's containerd (hack/images/build.sh load netpol)
#   3. runs the specs one at a time (e2e.test runs no parallel Ginkgo processes without the ginkgo CLI),
#      writing the JUnit report and the log into the report directory
#   4. prints the pass/fail/skip list (go run ./hack/netpolreport); NETPOL_DOC=docs/dev/netpol-conformance.md
#      writes it into the doc instead
# Exits with e2e.test's status. Env:
#   CLUSTER_DIR        the cluster (default <repo>/.cluster; its kubeconfig is used)
#   NETPOL_FOCUS       --ginkgo.focus (default Netpol: all 50 specs of the package)
#   NETPOL_SKIP        --ginkgo.skip (default: the SCTP connectivity group; see the doc for why)
#   NETPOL_TIMEOUT     --ginkgo.timeout for the whole run (default 3h; Ginkgo's own default, 1h, is too short)
#   NETPOL_REPORT_DIR  where junit_01.xml and e2e.log go (default: a new directory under ${TMPDIR:-/tmp})
#   NETPOL_DOC         a markdown file whose netpol-report section is replaced by the list
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$repo/.cluster}
NETPOL_FOCUS=${NETPOL_FOCUS:-Netpol}
NETPOL_SKIP=${NETPOL_SKIP:-'\[Feature:SCTPConnectivity\]'}
NETPOL_TIMEOUT=${NETPOL_TIMEOUT:-3h}
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

kubeconfig=$CLUSTER_DIR/kubeconfig
[ -f "$kubeconfig" ] || { echo "netpol-upstream: no $kubeconfig: start the cluster (make cluster-up NODES=4)" >&2; exit 1; }
"$repo/hack/tools/build.sh" e2e-test
CLUSTER_DIR=$CLUSTER_DIR "$repo/hack/images/build.sh" load netpol

dir=${NETPOL_REPORT_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/netpol-upstream.XXXXXX")}
mkdir -p "$dir"
echo "netpol-upstream: report and log in $dir" >&2
rc=0
# --provider=local: the framework's null provider (nothing here needs a cloud); --e2e-output-dir keeps the
# framework's other files with the report
"$repo/bin/e2e.test" --kubeconfig="$kubeconfig" --provider=local \
  --report-dir="$dir" --e2e-output-dir="$dir" \
  --ginkgo.focus="$NETPOL_FOCUS" --ginkgo.skip="$NETPOL_SKIP" --ginkgo.timeout="$NETPOL_TIMEOUT" \
  --ginkgo.v --ginkgo.no-color "$@" 2>&1 | tee "$dir/e2e.log" || rc=$?

junit=$dir/junit_01.xml
if [ -f "$junit" ]; then
  if [ -n "${NETPOL_DOC:-}" ]; then
    (cd "$repo" && go run ./hack/netpolreport -doc "$NETPOL_DOC" "$junit") && echo "netpol-upstream: list written into $NETPOL_DOC" >&2
  else
    (cd "$repo" && go run ./hack/netpolreport "$junit")
  fi
else
  echo "netpol-upstream: no $junit (the run ended before its report)" >&2
fi
echo "netpol-upstream: e2e.test exit status $rc; report and log in $dir" >&2
exit "$rc"
