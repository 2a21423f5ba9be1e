//go:build !linux

package cmd

func pidsLimitError() error { return nil }
