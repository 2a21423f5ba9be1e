//go:build !linux

package cmd

import "errors"

func sdNotify(addr, msg string) error { return errors.ErrUnsupported }
