package pg

import "fmt"

// runRole runs the contender role r in a re-executed test binary.
func runRole(r string) int {
	fmt.Println("unknown role", r)
	return 2
}
