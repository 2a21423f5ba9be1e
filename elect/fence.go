package elect

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/oslock"
)

// Fence is the resource side of fencing: it keeps, in a file beside the
// resource, the highest epoch it has accepted, and refuses work from a
// lower one. A leader that was stopped (or cut off) past its term and
// wakes up still believing it leads is turned away by the resource itself,
// which no lock alone can do.
//
// Every Do and Raise runs under an exclusive flock of the file, so the
// check, the write and fn are atomic with respect to every other user of
// the same file, in any process. A Fence is safe for concurrent use.
type Fence struct {
	path string
}

const fenceFormat = "leaderrun-fence %d\n"

// OpenFence returns the Fence kept in the file path, created (mode 0600)
// on first use. Give every writer of a resource the same path.
func OpenFence(path string) (*Fence, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := readFence(f); err != nil {
		return nil, err
	}
	return &Fence{path: path}, nil
}

// Raise records epoch as accepted without doing anything, as a new leader
// does at the start of its term: from then on no write of an older term
// slips in before the new leader's first. It returns ErrStaleEpoch if a
// higher epoch was accepted already. ctx bounds the wait for the file's
// lock.
func (f *Fence) Raise(ctx context.Context, epoch uint64) error {
	return f.Do(ctx, epoch, nil)
}

// Do runs fn if epoch is at least the highest accepted, after recording
// it, and holds the file's lock while fn runs, so that no other epoch's
// work interleaves. It returns ErrStaleEpoch (fn not run) for a lower
// epoch, and otherwise fn's error. ctx bounds the wait for the lock (a
// short back-off while another Do runs); it does not interrupt fn.
func (f *Fence) Do(ctx context.Context, epoch uint64, fn func() error) error {
	if epoch == 0 || epoch == math.MaxUint64 {
		return fmt.Errorf("elect: fence: epoch %d is not a term's epoch", epoch)
	}
	file, err := os.OpenFile(f.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer file.Close()
	if err := lockWait(ctx, file, true); err != nil {
		return err
	}
	defer oslock.Unlock(file)
	high, err := readFence(file)
	if err != nil {
		return err
	}
	if epoch < high {
		return fmt.Errorf("%w: epoch %d, the fence %s has accepted %d", ErrStaleEpoch, epoch, f.path, high)
	}
	if epoch > high {
		out := fmt.Appendf(nil, fenceFormat, epoch)
		if _, err := file.WriteAt(out, 0); err != nil {
			return err
		}
		if err := file.Truncate(int64(len(out))); err != nil {
			return err
		}
		if err := file.Sync(); err != nil {
			return err
		}
	}
	if fn == nil {
		return nil
	}
	return fn()
}

// Epoch returns the highest epoch accepted so far (0 if none).
func (f *Fence) Epoch(ctx context.Context) (uint64, error) {
	file, err := os.Open(f.path)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	if err := lockWait(ctx, file, false); err != nil {
		return 0, err
	}
	defer oslock.Unlock(file)
	return readFence(file)
}

func readFence(file *os.File) (uint64, error) {
	buf := make([]byte, 64)
	n, err := file.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	s, ok := strings.CutPrefix(string(buf[:n]), "leaderrun-fence ")
	s, ok2 := strings.CutSuffix(s, "\n")
	v, perr := strconv.ParseUint(s, 10, 64)
	if !ok || !ok2 || perr != nil || string(buf[:n]) != fmt.Sprintf(fenceFormat, v) {
		return 0, fmt.Errorf("%w: fence file %s holds %q, which leaderrun did not write; nothing was changed", ErrCorrupt, file.Name(), truncate(buf[:n]))
	}
	return v, nil
}
