package bus

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/leaderrun/leaderrun/internal/proctest"
)

// The test binary doubles as the leaders and members of the multi-process
// tests: TestMain runs the role that proctest.RoleEnv names (see
// helper_test.go) instead of the tests.

func TestMain(m *testing.M) {
	proctest.Main(map[string]func() int{
		"leader":  role("leader", roleLeader),
		"member":  role("member", roleMember),
		"rawdial": role("rawdial", roleRawDial),
	})
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/leaderrun/leaderrun/oslock.readSentinel"),
		goleak.IgnoreAnyFunction("github.com/leaderrun/leaderrun/oslock.readMounts"))
}
