package elect

import (
	"fmt"
	"os"
)

// reliabilityRole runs the helper process of the reliability tests that
// TestMain was asked for: "chaos" (chaos_test.go) or "hostile"
// (hostile_test.go).
func reliabilityRole(role string) int {
	switch role {
	case "chaos":
		return chaosContender()
	case "hostile":
		return hostileRole()
	case "defaultdir":
		return defaultDirRole()
	case "groupshared":
		return groupSharedRole()
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}
