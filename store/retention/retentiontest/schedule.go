package retentiontest

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// testScheduleStartsPurges: the built-in schedule purges every kind at once
// and again one interval later, retiring what is older than the retention.
// The time is the bubble's, so the test steps a whole interval of an hour
// and waits for none of it.
func testScheduleStartsPurges(t *testing.T, ts *suite) {
	synctest.Test(t, func(t *testing.T) {
		opts := quickOptions()
		opts.PollInterval = time.Minute // an hour of an idle engine's polls costs real time
		f := ts.openInBubble(t, opts)
		f.Seed(t, 2)
		f.Run(t)
		const interval = time.Hour
		scheduleFor(t, f, retention.Schedule{Retention: f.Now().Sub(cutoff), Interval: interval})

		var succeeded []*retention.Job
		awaitJobs(t, f, 2*interval, func(jobs []*retention.Job) bool {
			succeeded = succeeded[:0]
			for _, j := range jobs {
				if j.State == retention.Succeeded {
					succeeded = append(succeeded, j)
				}
			}
			return len(succeeded) >= 2
		})
		first, second := succeeded[len(succeeded)-1], succeeded[len(succeeded)-2] // jobs list newest first
		if len(first.Kinds) != len(images.Kinds) {
			t.Fatalf("scheduled purge of %d kinds, want all %d", len(first.Kinds), len(images.Kinds))
		}
		if apart := second.Created.Sub(first.Created); apart != interval {
			t.Errorf("the scheduled purges started %s apart, want the interval, %s", apart, interval)
		}
		const seeded = 3 * 2 // kinds x cameras
		wantCounts(t, "first scheduled purge", first.Totals(), retention.Counts{DevicesTotal: seeded, DevicesDone: seeded,
			MetadataRows: seeded * expiredPerCamera, IndexRows: seeded * expiredPerCamera})
		for _, kind := range images.Kinds {
			if got := f.Census(t, kind, first.Boundary()); got.PrimaryOld != 0 || got.IndexOld != 0 {
				t.Errorf("%s after scheduled purges: %+v", kind, got)
			}
		}
	})
}

// scheduleFor runs the engine's schedule s until the end of the test.
func scheduleFor(t *testing.T, f *Fixture, s retention.Schedule) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Engine.RunSchedule(ctx, s)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// awaitJobs waits until the engine's newest jobs (a page of 10, newest
// first) satisfy done, failing the test after within: in a bubble, a
// virtual time beyond every instant the test waits for. Between the
// engine's changes it looks every thousandth of within: in a bubble, every
// look costs real time.
func awaitJobs(t *testing.T, f *Fixture, within time.Duration, done func([]*retention.Job) bool) {
	t.Helper()
	deadline := time.After(within)
	for {
		changed := f.Engine.Changed()
		jobs, _, err := f.Engine.List(t.Context(), 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if done(jobs) {
			return
		}
		select {
		case <-changed:
		case <-time.After(within / 1000):
		case <-deadline:
			t.Fatalf("after %v, %d jobs, none as the test waits for", within, len(jobs))
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

// testPausedScheduleStartsNothing: a schedule paused from another replica
// starts no purge at its ticks, on every replica, until it is resumed, and
// then at its next tick. On the embedded store the time is the bubble's,
// so the test counts the skipped ticks of hours exactly and waits for
// none; on Azurite it runs on the wall clock, at ticks of 20 ms.
func testPausedScheduleStartsNothing(t *testing.T, ts *suite) {
	if ts.h.Backend == Azure {
		pausedSchedule(t, quickOptions(), ts.open, 20*time.Millisecond, false)
		return
	}
	synctest.Test(t, func(t *testing.T) {
		opts := quickOptions()
		opts.PollInterval = time.Minute // hours of an idle engine's polls cost real time
		pausedSchedule(t, opts, ts.openInBubble, time.Hour, true)
	})
}

// pausedSchedule is testPausedScheduleStartsNothing on the store open
// opens, with ticks every interval; virtual says the test runs in a
// bubble, where ticks can be counted exactly.
func pausedSchedule(t *testing.T, opts Options, open func(*testing.T, Options) *Fixture, interval time.Duration, virtual bool) {
	var skipped atomic.Int64
	opts.Logger = slog.New(messageCounter{word: "schedule is paused", n: &skipped})
	f := open(t, opts)
	f.Seed(t, 1)
	f.Run(t)
	other := f.OtherReplica(t)
	if st, err := f.Engine.ScheduleState(t.Context()); err != nil || st.Paused || !st.Changed.IsZero() {
		t.Fatalf("schedule never paused reads %+v, %v", st, err)
	}
	paused, err := other.SetSchedulePaused(t.Context(), true)
	if err != nil || !paused.Paused {
		t.Fatalf("pause: %+v, %v", paused, err)
	}
	if st, err := f.Engine.ScheduleState(t.Context()); err != nil || !st.Paused || !st.Changed.Equal(paused.Changed) {
		t.Fatalf("this replica reads %+v, %v; the other paused it at %s", st, err, paused.Changed)
	}
	start := f.Now()
	scheduleFor(t, f, retention.Schedule{Retention: start.Sub(cutoff), Interval: interval})
	if virtual {
		// Ticks at 0, 1, 2 and 3 intervals, none at the wake-up.
		time.Sleep(3*interval + interval/2)
		if n := skipped.Load(); n != 4 {
			t.Fatalf("the paused schedule skipped %d ticks in 3.5 intervals, want 4", n)
		}
	} else {
		deadline := time.After(patience)
		for skipped.Load() < 3 {
			select {
			case <-time.After(10 * time.Millisecond):
			case <-deadline:
				t.Fatalf("the paused schedule skipped %d ticks in %v", skipped.Load(), patience)
			}
		}
	}
	if jobs, _, err := f.Engine.List(t.Context(), 10, nil); err != nil || len(jobs) != 0 {
		t.Fatalf("a paused schedule started %d jobs (%v)", len(jobs), err)
	}
	if _, err := other.SetSchedulePaused(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	var first *retention.Job
	awaitJobs(t, f, max(patience, 2*interval), func(jobs []*retention.Job) bool {
		if len(jobs) == 0 || jobs[len(jobs)-1].State != retention.Succeeded {
			return false
		}
		first = jobs[len(jobs)-1]
		return true
	})
	if at := first.Created.Sub(start); virtual && at != 4*interval {
		t.Errorf("the resumed schedule started its purge %s after the schedule began, want at its next tick, %s", at, 4*interval)
	}
}
