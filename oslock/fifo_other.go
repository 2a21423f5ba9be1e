//go:build !unix

package oslock

import (
	"context"
	"os"
)

func waitHangup(ctx context.Context, f *os.File) error { return ErrUnsupported }

func hungUp(f *os.File) bool { return true }
