// Command etcd-autopilot-scorecard is the custom scorecard test image of the bundle
// (config/scorecard/patches/custom.config.yaml). operator-sdk scorecard runs it as a pod in the
// namespace where the operator is installed, with the bundle unpacked at /bundle; each run executes
// one test named by its argument against the running operator and prints one TestStatus
// (scorecard.operatorframework.io/v1alpha3) as JSON on stdout, and nothing else there.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
)

// The scorecard v1alpha3 result protocol: the fields scorecard reads from a test's stdout.
type state string

const (
	pass    state = "pass"
	fail    state = "fail"
	errored state = "error"
)

type testResult struct {
	Name   string   `json:"name"`
	Log    string   `json:"log,omitempty"`
	State  state    `json:"state"`
	Errors []string `json:"errors,omitempty"`
}

type testStatus struct {
	Results []testResult `json:"results"`
}

// bundleRoot is where scorecard unpacks the bundle in the test pod.
const bundleRoot = "/bundle"

// tests by name; each returns its log, or an error that fails it.
var tests = map[string]func(ctx context.Context, e *testEnv) (string, error){
	"etcdcluster-available": clusterAvailable,
	"member-recovery":       memberRecovery,
}

func main() {
	name := ""
	if len(os.Args) > 1 {
		name = os.Args[1]
	}
	res := testResult{Name: name}
	if test, ok := tests[name]; !ok {
		res.State, res.Errors = errored, []string{fmt.Sprintf("unknown test %q; known: %s", name, strings.Join(testNames(), ", "))}
	} else if e, err := newTestEnv(); err != nil {
		res.State, res.Errors = errored, []string{err.Error()}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), timeout())
		log, err := test(ctx, e)
		cancel()
		res.Log, res.State = log, pass
		if err != nil {
			res.State, res.Errors = fail, []string{err.Error()}
		}
	}
	out, _ := json.MarshalIndent(testStatus{Results: []testResult{res}}, "", "  ")
	fmt.Println(string(out))
}

func testNames() []string {
	var out []string
	for n := range tests {
		out = append(out, n)
	}
	return out
}

// timeout bounds each test; scorecard's own --wait-time must be longer.
func timeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SCORECARD_TEST_TIMEOUT")); err == nil {
		return d
	}
	return 8 * time.Minute
}

type testEnv struct {
	k8s client.Client
	ns  string
	// sample is the EtcdCluster of the CSV's alm-examples: what a user creates first.
	sample *etcdv1alpha1.EtcdCluster
}

func newTestEnv() (*testEnv, error) {
	ns := os.Getenv("SCORECARD_NAMESPACE")
	if ns == "" {
		return nil, fmt.Errorf("SCORECARD_NAMESPACE is not set: run through operator-sdk scorecard")
	}
	sample, err := sampleCluster(bundleRoot)
	if err != nil {
		return nil, err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := etcdv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &testEnv{k8s: k8s, ns: ns, sample: sample}, nil
}
