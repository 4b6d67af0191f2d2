package main

// The enforcer's CNI half. A policy engine must know a new pod's IP when its network comes up, not when the
// kubelet gets round to posting it: the kubelet posts a pod's IP at its first sync after the sandbox, up to
// a PLEG relist (1 s) later, and until then every peer refuses the pod and the pod itself is unprotected.
// Real engines learn it at the same point (Calico's CNI plugin writes the workload endpoint, Cilium's
// creates the endpoint, both during CNI ADD). So the netpol-enforcer binary is also a chained CNI plugin:
// run by the container runtime after the bridge plugin, it writes the pod's UID and IP into a report
// directory shared by every node of this one host, and the enforcer reads those reports as the IPs of pods
// whose status has none yet.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// cniConfig is the part of the plugin's network configuration it reads.
type cniConfig struct {
	CNIVersion string          `json:"cniVersion"`
	ReportDir  string          `json:"reportDir"`
	PrevResult json.RawMessage `json:"prevResult"`
}

type cniResult struct {
	IPs []struct {
		Address string `json:"address"`
	} `json:"ips"`
}

// cniReport is what one pod's report file holds.
type cniReport struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	ContainerID string `json:"containerID"`
	IP          string `json:"ip"`
}

// runCNI is main when the runtime runs the binary as a CNI plugin (CNI_COMMAND set): it answers on out and
// returns the exit code. It never fails an ADD over a report it cannot write: the enforcer then learns the
// IP from the pod's status, later, as it did before.
func runCNI(env func(string) string, in io.Reader, out io.Writer) int {
	fail := func(err error) int {
		_ = json.NewEncoder(out).Encode(map[string]any{"cniVersion": "1.0.0", "code": 999, "msg": err.Error()})
		return 1
	}
	cmd := env("CNI_COMMAND")
	if cmd == "VERSION" {
		_, _ = fmt.Fprint(out, `{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}`)
		return 0
	}
	var conf cniConfig
	if err := json.NewDecoder(in).Decode(&conf); err != nil {
		return fail(fmt.Errorf("read network configuration: %w", err))
	}
	args := cniArgs(env("CNI_ARGS"))
	uid := args["K8S_POD_UID"]
	switch cmd {
	case "ADD":
		if len(conf.PrevResult) == 0 {
			return fail(errors.New("kc-netpol is a chained plugin: no prevResult"))
		}
		if rep, ok := reportOf(conf.PrevResult, args, env("CNI_CONTAINERID")); ok && conf.ReportDir != "" && uid != "" {
			if err := writeReport(conf.ReportDir, uid, rep); err != nil {
				fmt.Fprintf(os.Stderr, "kc-netpol: %v\n", err)
			}
		}
		// a chained plugin passes the result it was given on
		_, _ = out.Write(conf.PrevResult)
	case "DEL":
		if conf.ReportDir != "" && uid != "" {
			removeReport(conf.ReportDir, uid, env("CNI_CONTAINERID"))
		}
	case "CHECK", "GC", "STATUS":
	default:
		return fail(fmt.Errorf("unknown CNI_COMMAND %q", cmd))
	}
	return 0
}

// cniArgs parses CNI_ARGS ("K=V;K=V"), where the runtime names the pod.
func cniArgs(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ";") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func reportOf(prev json.RawMessage, args map[string]string, containerID string) (cniReport, bool) {
	var res cniResult
	if json.Unmarshal(prev, &res) != nil {
		return cniReport{}, false
	}
	for _, ip := range res.IPs {
		p, err := netip.ParsePrefix(ip.Address)
		if err == nil && p.Addr().Is4() {
			return cniReport{Namespace: args["K8S_POD_NAMESPACE"], Name: args["K8S_POD_NAME"], ContainerID: containerID, IP: p.Addr().String()}, true
		}
	}
	return cniReport{}, false
}

// writeReport replaces the report by rename, so the enforcer never reads half of one.
func writeReport(dir, uid string, r cniReport) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report directory: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+uid+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, uid))
}

// removeReport deletes the pod's report unless it belongs to a newer sandbox of the same pod.
func removeReport(dir, uid, containerID string) {
	path := filepath.Join(dir, uid)
	if r, ok := readReport(path); ok && containerID != "" && r.ContainerID != containerID {
		return
	}
	_ = os.Remove(path)
}

func readReport(path string) (cniReport, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return cniReport{}, false
	}
	var r cniReport
	return r, json.Unmarshal(b, &r) == nil && r.IP != ""
}

// readReports returns the IP of every reported pod by UID.
func readReports(dir string) map[types.UID]cniReport {
	m := map[types.UID]cniReport{}
	if dir == "" {
		return m
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if r, ok := readReport(filepath.Join(dir, e.Name())); ok {
			m[types.UID(e.Name())] = r
		}
	}
	return m
}

// withReportedIPs gives every pod whose status has no IP yet the IP its CNI report names, matched by UID and
// name (a UID is never reused, the name guards a report read from another cluster's directory). The pods
// are the informer's: changed ones are copies.
func withReportedIPs(pods []*corev1.Pod, reports map[types.UID]cniReport) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		r, ok := reports[p.UID]
		if p.Status.PodIP == "" && ok && r.Namespace == p.Namespace && r.Name == p.Name && !p.Spec.HostNetwork {
			c := p.DeepCopy()
			c.Status.PodIP = r.IP
			p = c
		}
		out = append(out, p)
	}
	return out
}
