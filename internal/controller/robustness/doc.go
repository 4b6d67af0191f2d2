// Package robustness holds the operator's tests against bad input on a real kube-apiserver
// (envtest): objects stored under a looser CRD must never stop the manager, and a spec fuzzer
// shows that whatever the API server admits, the manager neither panics nor exits and every
// object gets a condition. Run the fuzzer longer with `make fuzz FUZZTIME=10m`.
package robustness
