//go:build !unix

package cmd

import "errors"

func sdNotify(addr, msg string) error { return errors.ErrUnsupported }
