//go:build !unix

package cmd

func startPoller() error { return nil }
