package etcdbackup

import (
	"errors"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/etcdbackupschedule"
	"github.com/etcd-autopilot/etcd-autopilot/internal/controller/etcdcluster"
	"github.com/etcd-autopilot/etcd-autopilot/internal/testutil/operatortest"
)

// k8s is the envtest API server's administrator; the operator runs beside the tests, all three
// reconcilers as in cmd/manager (a backup's cluster and schedule are the other two's).
var k8s client.Client

func TestMain(m *testing.M) {
	operatortest.Main(m, &k8s, operatortest.Suite{Cache: etcdcluster.CacheOptions(nil), Setup: func(mgr ctrl.Manager, op operatortest.Operator) error {
		return errors.Join(
			(&etcdcluster.EtcdClusterReconciler{Client: op.Client, Scheme: op.Scheme, Recorder: op.Recorder, OperatorImage: op.Image, OperatorNamespace: op.OperatorNamespace}).SetupWithManager(mgr),
			(&EtcdBackupReconciler{Client: op.Client, Recorder: op.Recorder, OperatorImage: op.Image}).SetupWithManager(mgr),
			(&etcdbackupschedule.EtcdBackupScheduleReconciler{Client: op.Client, Recorder: op.Recorder, OperatorImage: op.Image, Now: op.Now, ArchiveStatusURL: op.ArchiveStatusURL}).SetupWithManager(mgr),
		)
	}})
}
