package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store/images"
)

// Defaults of SilenceOptions.
const (
	DefaultSilentFor     = 15 * time.Minute
	DefaultLookBack      = 7 * 24 * time.Hour
	DefaultCountInterval = time.Minute
)

// SilenceOptions configures NewSilence.
type SilenceOptions struct {
	// Views are the views counted, one per image kind.
	Views []*View
	// SilentFor and LookBack say which cameras are silent (see Silent);
	// 0 means DefaultSilentFor and DefaultLookBack.
	SilentFor, LookBack time.Duration
	// Interval is Run's period; 0 means DefaultCountInterval.
	Interval time.Duration
	Logger   *slog.Logger
}

// Silence counts the silent cameras of each view in the background, so
// that a metrics scrape reads the last counts and not the store.
type Silence struct {
	opts   SilenceOptions
	mu     sync.Mutex
	counts map[images.Kind]int
}

// NewSilence makes the counter; nothing is counted before RunOnce.
func NewSilence(opts SilenceOptions) *Silence {
	if opts.SilentFor <= 0 {
		opts.SilentFor = DefaultSilentFor
	}
	if opts.LookBack <= 0 {
		opts.LookBack = DefaultLookBack
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultCountInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Silence{opts: opts, counts: map[images.Kind]int{}}
}

// RunOnce counts every view's silent cameras. A view whose count fails
// keeps its last count; the others are counted all the same.
func (s *Silence) RunOnce(ctx context.Context) error {
	var errs []error
	for _, v := range s.opts.Views {
		n, err := v.CountSilent(ctx, s.opts.SilentFor, s.opts.LookBack)
		if err != nil {
			errs = append(errs, fmt.Errorf("fleet: counting silent %s cameras: %w", v.Kind(), err))
			continue
		}
		s.mu.Lock()
		s.counts[v.Kind()] = n
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Run counts at once, then every Interval, until ctx ends.
func (s *Silence) Run(ctx context.Context) {
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		if err := s.RunOnce(ctx); err != nil && ctx.Err() == nil {
			s.opts.Logger.Warn("fleet: counting silent cameras", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Counts are the last counts per image kind, of the kinds counted so far.
func (s *Silence) Counts() map[images.Kind]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.counts)
}
