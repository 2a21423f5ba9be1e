package bus

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// roleEnv names the part a re-executed test binary plays; see helper_test.go.
const roleEnv = "LEADERRUN_BUS_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runRole(role))
	}
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/leaderrun/leaderrun/oslock.readSentinel"))
}
