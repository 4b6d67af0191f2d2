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
