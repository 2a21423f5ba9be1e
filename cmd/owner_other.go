//go:build !unix

package cmd

import "io/fs"

func ownerOf(fs.FileInfo) (uid int, mode uint32, ok bool) { return 0, 0, false }
