package diskspace_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/diskspace"
)

func TestGuard(t *testing.T) {
	var free uint64
	var freeErr error
	var logs bytes.Buffer
	g := diskspace.New(diskspace.Options{Dir: "/data", MinFree: 100,
		Free:   func(string) (uint64, error) { return free, freeErr },
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	steps := []struct {
		name    string
		free    uint64
		freeErr error
		wantLow bool
	}{
		{name: "above the floor", free: 500},
		{name: "at the floor", free: 100},
		{name: "below the floor", free: 99, wantLow: true},
		{name: "still below", free: 10, wantLow: true},
		{name: "unmeasurable stands aside", freeErr: errors.New("statfs: no such file"), wantLow: false},
		{name: "below again", free: 0, wantLow: true},
		{name: "freed", free: 1000},
	}
	for _, s := range steps {
		free, freeErr = s.free, s.freeErr
		err := g.Check()
		if low := errors.Is(err, diskspace.ErrLow); low != s.wantLow || (err != nil && !low) {
			t.Errorf("%s: Check() = %v, want low %v", s.name, err, s.wantLow)
		}
		if err := g.Admit(t.Context()); errors.Is(err, diskspace.ErrLow) != s.wantLow {
			t.Errorf("%s: Admit() = %v, want low %v", s.name, err, s.wantLow)
		}
		if err := g.Admit(diskspace.Exempt(context.Background())); err != nil {
			t.Errorf("%s: Admit(exempt) = %v", s.name, err)
		}
	}
	// Each change is logged once, however often it is checked; a failed
	// measurement is no change of level.
	for want, n := range map[string]int{"free space below the floor": 1, "free space back above the floor": 1, "cannot be measured": 1} {
		if got := strings.Count(logs.String(), want); got != n {
			t.Errorf("log has %q %d times, want %d:\n%s", want, got, n, logs.String())
		}
	}
}

func TestGuardOffAtZero(t *testing.T) {
	g := diskspace.New(diskspace.Options{Dir: "/data", Free: func(string) (uint64, error) { return 0, nil }})
	if err := g.Check(); err != nil {
		t.Fatalf("a guard with no floor refused: %v", err)
	}
}

func TestGuardMeasuresTheRealFilesystem(t *testing.T) {
	g := diskspace.New(diskspace.Options{Dir: t.TempDir(), MinFree: 1 << 62, Logger: slog.New(slog.DiscardHandler)})
	if err := g.Check(); !errors.Is(err, diskspace.ErrLow) {
		t.Fatalf("a floor of 4 EiB on a real filesystem: Check() = %v, want ErrLow", err)
	}
}

// TestGuardReusesARoomyReading: with room above the floor a reading is
// reused for a tenth of a second; near the floor, after a failed reading
// and once the reading is that old, every check measures again.
func TestGuardReusesARoomyReading(t *testing.T) {
	const floor = 1 << 30
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	free, readings := uint64(floor+1<<30), 0
	var freeErr error
	g := diskspace.New(diskspace.Options{Dir: "/data", MinFree: floor, Logger: slog.New(slog.DiscardHandler),
		Now:  func() time.Time { return now },
		Free: func(string) (uint64, error) { readings++; return free, freeErr }})
	check := func(name string, wantReadings int, wantLow bool) {
		t.Helper()
		err := g.Check()
		if errors.Is(err, diskspace.ErrLow) != wantLow {
			t.Errorf("%s: Check() = %v, want low %v", name, err, wantLow)
		}
		if readings != wantReadings {
			t.Errorf("%s: %d readings, want %d", name, readings, wantReadings)
		}
	}
	check("first", 1, false)
	now = now.Add(99 * time.Millisecond)
	free = 0 // the next reading would refuse, but the last one is fresh and roomy
	check("within a tenth of a second", 1, false)
	now = now.Add(time.Millisecond)
	check("a tenth of a second later", 2, true)
	check("below the floor, at once", 3, true)
	free = floor + 64<<20 - 1 // above the floor, but within the margin
	check("just above the floor", 4, false)
	check("just above the floor, at once", 5, false)
	free, freeErr = floor+1<<30, errors.New("statfs: interrupted")
	check("unmeasurable", 6, false)
	check("unmeasurable, at once", 7, false)
	freeErr = nil
	check("roomy again", 8, false)
	check("roomy again, at once", 8, false)
}
