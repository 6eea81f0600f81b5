package retention_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// TestScheduleStartsPurges: the built-in schedule purges every kind at once
// and again every interval, retiring what is older than the retention.
func TestScheduleStartsPurges(t *testing.T) {
	f := newFixture(t, quickOptions())
	f.seed(t, 2)
	f.run(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.engine.RunSchedule(ctx, retention.Schedule{Retention: time.Since(cutoff), Interval: 20 * time.Millisecond})
	}()
	defer func() {
		cancel()
		<-done
	}()

	deadline := time.After(patience)
	for {
		jobs, _, err := f.engine.List(t.Context(), 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		var succeeded []*retention.Job
		for _, j := range jobs {
			if j.State == retention.Succeeded {
				succeeded = append(succeeded, j)
			}
		}
		if len(succeeded) >= 2 {
			first := succeeded[len(succeeded)-1] // jobs list newest first
			if len(first.Kinds) != len(images.Kinds) {
				t.Fatalf("scheduled purge of %d kinds, want all %d", len(first.Kinds), len(images.Kinds))
			}
			const seeded = 3 * 2 // kinds x cameras
			wantCounts(t, "first scheduled purge", first.Totals(), retention.Counts{DevicesTotal: seeded, DevicesDone: seeded,
				MetadataRows: seeded * expiredPerCamera, IndexRows: seeded * expiredPerCamera})
			for _, kind := range images.Kinds {
				if got := f.census(t, kind, first.Boundary()); got.primaryOld != 0 || got.indexOld != 0 {
					t.Errorf("%s after scheduled purges: %+v", kind, got)
				}
			}
			return
		}
		select {
		case <-f.engine.Changed():
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("after %v, %d jobs: want two scheduled purges done", patience, len(jobs))
		}
	}
}

// messageCounter is a log handler that counts the messages holding a word.
type messageCounter struct {
	word string
	n    *atomic.Int64
}

func (h messageCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h messageCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.word) {
		h.n.Add(1)
	}
	return nil
}
func (h messageCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h messageCounter) WithGroup(string) slog.Handler      { return h }

// TestPausedScheduleStartsNothing: a schedule paused from another replica
// starts no purge at its ticks, on every replica, until it is resumed.
func TestPausedScheduleStartsNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, newFixture func(*testing.T, retention.Options) *fixture) {
		var skipped atomic.Int64
		opts := quickOptions()
		opts.Logger = slog.New(messageCounter{word: "schedule is paused", n: &skipped})
		f := newFixture(t, opts)
		f.seed(t, 1)
		f.run(t)
		other := f.otherReplica(t)
		if st, err := f.engine.ScheduleState(t.Context()); err != nil || st.Paused || !st.Changed.IsZero() {
			t.Fatalf("schedule never paused reads %+v, %v", st, err)
		}
		paused, err := other.SetSchedulePaused(t.Context(), true)
		if err != nil || !paused.Paused {
			t.Fatalf("pause: %+v, %v", paused, err)
		}
		if st, err := f.engine.ScheduleState(t.Context()); err != nil || !st.Paused || !st.Changed.Equal(paused.Changed) {
			t.Fatalf("this replica reads %+v, %v; the other paused it at %s", st, err, paused.Changed)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.engine.RunSchedule(ctx, retention.Schedule{Retention: time.Since(cutoff), Interval: 20 * time.Millisecond})
		}()
		defer func() {
			cancel()
			<-done
		}()
		deadline := time.After(patience)
		for skipped.Load() < 3 {
			select {
			case <-time.After(10 * time.Millisecond):
			case <-deadline:
				t.Fatalf("the paused schedule skipped %d ticks in %v", skipped.Load(), patience)
			}
		}
		if jobs, _, err := f.engine.List(t.Context(), 10, nil); err != nil || len(jobs) != 0 {
			t.Fatalf("a paused schedule started %d jobs (%v)", len(jobs), err)
		}
		if _, err := other.SetSchedulePaused(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		for {
			jobs, _, err := f.engine.List(t.Context(), 10, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) > 0 && jobs[len(jobs)-1].State == retention.Succeeded {
				return
			}
			select {
			case <-f.engine.Changed():
			case <-time.After(10 * time.Millisecond):
			case <-deadline:
				t.Fatalf("the resumed schedule ran no purge in %v: %d jobs", patience, len(jobs))
			}
		}
	})
}
