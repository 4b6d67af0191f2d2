package framework

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "github.com/etcd-autopilot/etcd-autopilot/api/v1alpha1"
	"github.com/etcd-autopilot/etcd-autopilot/internal/naming"
	"github.com/etcd-autopilot/etcd-autopilot/internal/resources"
)

// secretNeedles are the forms a value of a Secret in ns could take where it leaked: the value, its
// base64 (a []byte marshalled to JSON), and for a PEM private key a stretch of its base64 body past the
// ASN.1 header every key shares. Certificates (*.crt) are public, an S3 access key ID is an identifier
// (status messages may name it; the secret access key is the secret), and values under 8 bytes are not
// distinctive enough to search for; tests that make Secrets give them values no log line holds anyway
// (a fake access key "etcd-autopilot" is found everywhere).
func (e *Env) secretNeedles(ctx context.Context, ns string) (map[string]string, error) {
	secrets := &corev1.SecretList{}
	if err := e.K8s.List(ctx, secrets, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list secrets in %s: %w", ns, err)
	}
	needles := map[string]string{}
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			if strings.HasSuffix(k, ".crt") || k == resources.SecretAccessKeyID || len(v) < 8 {
				continue
			}
			what := fmt.Sprintf("Secret %s key %s", s.Name, k)
			if b, _ := pem.Decode(v); b != nil {
				body := base64.StdEncoding.EncodeToString(b.Bytes)
				if len(body) >= 44 {
					needles[body[12:44]] = what + " (PEM body)"
				}
				continue
			}
			needles[string(v)] = what
			needles[base64.StdEncoding.EncodeToString(v)] = what + " (base64)"
		}
	}
	return needles, nil
}

// secretHaystacks is where no secret may appear: the operator's log, every Event of ns, the status of
// every EtcdCluster, EtcdBackup and EtcdBackupSchedule, and the command, args and env of the containers
// of every Job and Pod the operator made (a Secret reaches them only as a volume or a secretKeyRef).
func (e *Env) secretHaystacks(ctx context.Context, ns, operatorLog string) (map[string]string, error) {
	hay := map[string]string{"the operator's log": operatorLog}
	add := func(what string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("marshal %s: %w", what, err)
		}
		hay[what] = string(b)
		return nil
	}
	in := client.InNamespace(ns)
	events := &corev1.EventList{}
	if err := e.K8s.List(ctx, events, in); err != nil {
		return nil, err
	}
	for _, ev := range events.Items {
		if err := add(fmt.Sprintf("Event %s (%s on %s %s)", ev.Name, ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name), ev); err != nil {
			return nil, err
		}
	}
	clusters, backups, schedules := &etcdv1alpha1.EtcdClusterList{}, &etcdv1alpha1.EtcdBackupList{}, &etcdv1alpha1.EtcdBackupScheduleList{}
	for _, l := range []client.ObjectList{clusters, backups, schedules} {
		if err := e.K8s.List(ctx, l, in); err != nil {
			return nil, err
		}
	}
	for _, c := range clusters.Items {
		if err := add("EtcdCluster "+c.Name+" status", c.Status); err != nil {
			return nil, err
		}
	}
	for _, b := range backups.Items {
		if err := add("EtcdBackup "+b.Name+" status", b.Status); err != nil {
			return nil, err
		}
	}
	for _, s := range schedules.Items {
		if err := add("EtcdBackupSchedule "+s.Name+" status", s.Status); err != nil {
			return nil, err
		}
	}
	ours := client.MatchingLabels{naming.LabelManagedBy: naming.ManagedBy}
	pods := &corev1.PodList{}
	if err := e.K8s.List(ctx, pods, in, ours); err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		if err := add("Pod "+p.Name+" containers", append(p.Spec.InitContainers, p.Spec.Containers...)); err != nil {
			return nil, err
		}
	}
	jobs := &batchv1.JobList{}
	if err := e.K8s.List(ctx, jobs, in, ours); err != nil {
		return nil, err
	}
	for _, j := range jobs.Items {
		if err := add("Job "+j.Name+" containers", append(j.Spec.Template.Spec.InitContainers, j.Spec.Template.Spec.Containers...)); err != nil {
			return nil, err
		}
	}
	return hay, nil
}

// SecretLeaks lists every place where a value of a Secret of ns appears in what the operator wrote and
// must hold no secret (secretHaystacks); empty when there is none.
func (e *Env) SecretLeaks(ctx context.Context, ns, operatorLog string) ([]string, error) {
	needles, err := e.secretNeedles(ctx, ns)
	if err != nil {
		return nil, err
	}
	hay, err := e.secretHaystacks(ctx, ns, operatorLog)
	if err != nil {
		return nil, err
	}
	var leaks []string
	for where, text := range hay {
		for needle, what := range needles {
			if strings.Contains(text, needle) {
				leaks = append(leaks, fmt.Sprintf("%s holds %s", where, what))
			}
		}
	}
	sort.Strings(leaks)
	return leaks, nil
}
