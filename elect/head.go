package elect

import (
	"hash/crc32"
	"os"
	"strconv"
)

// The head of the line is a hint, kept in the lock file after the floor,
// that spares a waiter the check of every ticket it saw ahead when it
// joined: in a chain of N, the waiter that joined behind k others would
// otherwise look for all k at its first wake-up, when nearly all have
// gone (N²/2 lookups over the chain).
//
// Each grant writes, with the floor and in the same write, the lowest
// number of an ordinary ("t") ticket that the granted request still saw
// ahead of it, or its own number when it saw none: the head H. No
// ordinary ticket below H existed then (tickets join behind those in the
// queue, under the state lock, and never come back once gone, except one
// being put back after its queue was removed, which a waiter that waits
// on it knows by its beacon), so none exists later. A waiter then drops
// the tickets below H that it knew of without looking for them.
//
// The hint counts only while it belongs to the floor next to it: it
// carries a checksum over the floor line and itself, so a floor written
// by a grant that left no hint (a steal's, an older leaderrun's, a state
// file recounted), a truncation (flock(1)'s 9>FILE) or a torn read makes
// it void, and then every ticket is looked for as before. The older
// leaderrun reads the floor only, at the start of the file.

const headPrefix = "leaderrun-head "

// headLen is the length of the hint line: the prefix, 20 digits, a
// space, 8 hex digits of checksum and a newline.
const headLen = len(headPrefix) + 20 + 1 + 8 + 1

// floorLen is the length of the floor line before the hint.
const floorLen = len(floorPrefix) + 20 + 1

// appendHead appends the hint line for head after floor, the floor line
// that it is written with.
func appendHead(floor []byte, head uint64) []byte {
	b := append(floor, headPrefix...)
	b = appendDigits(b, head)
	sum := crc32.ChecksumIEEE(b)
	b = append(b, ' ')
	var hex [8]byte
	for i := range hex {
		hex[7-i] = "0123456789abcdef"[sum>>(4*i)&0xf]
	}
	b = append(b, hex[:]...)
	return append(b, '\n')
}

// appendDigits appends n in 20 decimal digits.
func appendDigits(b []byte, n uint64) []byte {
	var digits [20]byte
	for i := len(digits) - 1; i >= 0; i-- {
		digits[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, digits[:]...)
}

// parseHead reads the hint from the start of a lock file's content (the
// floor line and the hint line); ok is false when there is none or it
// does not belong to the floor beside it.
func parseHead(b []byte) (head uint64, ok bool) {
	if len(b) < floorLen+headLen {
		return 0, false
	}
	b = b[:floorLen+headLen]
	if _, ok := parseFloor(b[:floorLen]); !ok {
		return 0, false
	}
	line := b[floorLen:]
	if string(line[:len(headPrefix)]) != headPrefix || line[headLen-10] != ' ' || line[headLen-1] != '\n' {
		return 0, false
	}
	sum, err := strconv.ParseUint(string(line[headLen-9:headLen-1]), 16, 32)
	if err != nil || uint32(sum) != crc32.ChecksumIEEE(b[:floorLen+len(headPrefix)+20]) {
		return 0, false
	}
	head, err = strconv.ParseUint(string(line[len(headPrefix):len(headPrefix)+20]), 10, 64)
	return head, err == nil
}

// readHead reads the hint from lockF.
func readHead(lockF *os.File) (uint64, bool) {
	var buf [floorLen + headLen]byte
	n, _ := lockF.ReadAt(buf[:], 0)
	return parseHead(buf[:n])
}

// headOf is the head of the line that a request whose ticket is own sees
// when nothing of ahead (the tickets before it) blocks it: the lowest
// ordinary ticket of ahead, else own's number; 0 (no hint) for a steal,
// which does not see the ordinary tickets.
func headOf(own entry, ahead []entry) uint64 {
	if own.steal {
		return 0
	}
	for _, e := range ahead {
		if !e.steal {
			return e.seq // ahead is in queue order
		}
	}
	return own.seq
}

// headHint is the head of the line as the last grant left it, or 0. A
// hint above our own number cannot be: a grant sees us ahead of it, or
// is ahead of us.
func (a *acquirer) headHint() uint64 {
	if a.openLock() != nil {
		return 0
	}
	h, ok := readHead(a.lockF)
	if !ok || h > a.tk.e.seq {
		return 0
	}
	return h
}

// voidHead removes the hint from the lock file, for a ticket counter that
// is recounted (its state file was removed or emptied): the numbers below
// the head may be drawn again. It runs under the state lock.
func (a *acquirer) voidHead() {
	if a.openLock() != nil {
		return
	}
	if _, ok := readHead(a.lockF); ok {
		var blank [headLen]byte
		for i := range blank {
			blank[i] = ' '
		}
		blank[headLen-1] = '\n'
		a.lockF.WriteAt(blank[:], int64(floorLen))
	}
}
