package diskspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrLow reports free space below the guard's floor.
var ErrLow = errors.New("diskspace: free space below the floor")

// Options configures New.
type Options struct {
	// Dir is a directory on the guarded filesystem.
	Dir string
	// MinFree is the floor in bytes; 0 turns the guard off.
	MinFree uint64
	// Free measures the bytes an unprivileged writer can still use on the
	// filesystem holding dir; nil means the operating system's statfs.
	Free func(dir string) (uint64, error)
	// Logger receives one line each time space falls below or rises above
	// the floor; nil means slog.Default.
	Logger *slog.Logger
	// Now is the clock of the readings' ages; nil means time.Now.
	Now func() time.Time
}

// A reading that left at least roomAbove over the floor is reused for
// reuseFor: a statfs costs a create 2-4 us of CPU, and the writes of a
// tenth of a second are far below a memtable's 64 MiB, so they cannot
// cross the floor on a reading that old. Nearer the floor every check
// measures, so a write is never admitted on a reading that could be stale
// by the floor's margin.
const (
	reuseFor  = 100 * time.Millisecond
	roomAbove = 64 << 20
)

// Guard measures free space, at most every reuseFor while there is room
// (see above).
type Guard struct {
	opts Options
	// roomyAt is when a reading last left room above the floor, in Unix
	// nanoseconds; 0 when the last did not.
	roomyAt atomic.Int64

	mu sync.Mutex
	// low and unmeasurable are the last outcome, kept to log each change once.
	low, unmeasurable bool
}

// New returns a guard of opts.Dir's filesystem.
func New(opts Options) *Guard {
	if opts.Free == nil {
		opts.Free = free
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Guard{opts: opts}
}

// Check measures free space (or reuses a recent roomy reading): nil when it
// is at or above the floor (or cannot be measured: the guard then stands
// aside rather than stop every write), an error wrapping ErrLow below it.
func (g *Guard) Check() error {
	if g == nil || g.opts.MinFree == 0 {
		return nil
	}
	now := g.opts.Now().UnixNano()
	if at := g.roomyAt.Load(); at != 0 && now-at < int64(reuseFor) {
		return nil
	}
	avail, err := g.opts.Free(g.opts.Dir)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil && avail-min(avail, g.opts.MinFree) >= roomAbove {
		g.roomyAt.Store(now)
	} else {
		g.roomyAt.Store(0)
	}
	if err != nil {
		if !g.unmeasurable {
			g.opts.Logger.Warn("free space cannot be measured; writes are not guarded", "dir", g.opts.Dir, "err", err)
		}
		g.unmeasurable = true
		return nil
	}
	g.unmeasurable = false
	low := avail < g.opts.MinFree
	if low != g.low {
		if low {
			g.opts.Logger.Error("free space below the floor: refusing writes until space is freed",
				"dir", g.opts.Dir, "free_bytes", avail, "min_free_bytes", g.opts.MinFree)
		} else {
			g.opts.Logger.Info("free space back above the floor: accepting writes",
				"dir", g.opts.Dir, "free_bytes", avail, "min_free_bytes", g.opts.MinFree)
		}
		g.low = low
	}
	if low {
		return fmt.Errorf("%w: %d bytes free in %s, floor %d", ErrLow, avail, g.opts.Dir, g.opts.MinFree)
	}
	return nil
}

// Low reports whether the last reading was below the floor: writes are
// refused until one is not.
func (g *Guard) Low() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.low
}

// Admit is Check for a write made under ctx; writes marked by Exempt pass
// whatever the space.
func (g *Guard) Admit(ctx context.Context) error {
	if ctx.Value(exemptKey{}) != nil {
		return nil
	}
	return g.Check()
}

type exemptKey struct{}

// Exempt marks writes under ctx as ones that free space or that freeing it
// depends on (purges and their bookkeeping), or that stop or limit
// deletion (a purge's cancellation, a legal hold), which must not be
// refused while purges go on: they pass the guard, using the headroom the
// floor keeps.
func Exempt(ctx context.Context) context.Context {
	return context.WithValue(ctx, exemptKey{}, true)
}
