package cmd

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"

	"github.com/leaderrun/leaderrun/elect"
)

// deriveName is the lock name used when --name is not given:
//
//	BASE-HASH
//
// BASE is the last path element of COMMAND with every byte outside
// [A-Za-z0-9._@+=,:-] replaced by '_', leading dots and dashes dropped,
// cut to 40 bytes ("cmd" when nothing is left). HASH is the first 8 hex
// digits of the SHA-256 of COMMAND and each ARG as given, each followed by
// a NUL byte. So `leaderrun -- backup.sh /home` and `leaderrun --
// backup.sh /srv` are different locks, and so are `backup.sh` and
// `./backup.sh`: pass --name to share one lock between different command
// lines.
func deriveName(argv []string) string {
	base := []byte(filepath.Base(argv[0]))
	for i, c := range base {
		if !elect.NameByte(c) {
			base[i] = '_'
		}
	}
	b := strings.TrimLeft(string(base), ".-")
	if len(b) > 40 {
		b = b[:40]
	}
	if b == "" {
		b = "cmd"
	}
	h := sha256.New()
	for _, a := range argv {
		h.Write([]byte(a))
		h.Write([]byte{0})
	}
	return b + "-" + hex.EncodeToString(h.Sum(nil))[:8]
}
