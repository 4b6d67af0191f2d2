package failpoint

import (
	"sync"
	"testing"
)

func TestHitExitsOnlyWhenArmed(t *testing.T) {
	t.Setenv(EnvVar, "afterMemberAdd, afterPromote")
	once, armed = sync.Once{}, nil
	var code int
	exit = func(c int) { code = c }
	Hit(AfterMemberRemove)
	if code != 0 {
		t.Fatal("unarmed failpoint fired")
	}
	Hit(AfterPromote)
	if code != ExitCode {
		t.Fatal("armed failpoint did not fire")
	}
}

func TestArmPanickingPanicsUntilDisarmed(t *testing.T) {
	t.Setenv(EnvVar, "")
	once, armed = sync.Once{}, nil
	disarm := ArmPanicking(AfterDefragment)
	func() {
		defer func() {
			if v := recover(); v != (Crash{Name: AfterDefragment}) {
				t.Fatalf("recovered %v, want the Crash of %s", v, AfterDefragment)
			}
		}()
		Hit(AfterDefragment)
	}()
	Hit(AfterPromote) // not armed: no panic
	disarm()
	Hit(AfterDefragment)
}
