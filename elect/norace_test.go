//go:build !race

package elect

const raceBuild = false
