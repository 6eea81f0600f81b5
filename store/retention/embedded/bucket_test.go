package embedded

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestWorkBucketBoundsEverySpan: sections of any length, with idle gaps
// between some, each followed by the rest spend returns: in every span
// from a section's start to the end of a later section's rest the work
// is at most the burst plus the share of the span; the sections that fit
// the burst at first rest not at all; and without a burst a section of d
// rests d*(1-share)/share.
func TestWorkBucketBoundsEverySpan(t *testing.T) {
	const share = 0.1
	for _, burst := range []time.Duration{0, 50 * time.Millisecond} {
		b := workBucket{share: share, burst: burst}
		rng := rand.New(rand.NewPCG(1, uint64(burst)))
		type section struct {
			start, restEnd time.Time
			work           time.Duration
		}
		var sections []section
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var spent time.Duration
		for i := range 400 {
			if rng.IntN(10) == 0 {
				now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond) // idle: no requests, or another job's gap
			}
			work := time.Duration(500+rng.IntN(4500)) * time.Microsecond
			start, end := now, now.Add(work)
			rest := b.spend(start, end)
			if spent += work; spent <= burst && rest != 0 {
				t.Fatalf("burst %s: section %d rested %s with %s of work so far", burst, i, rest, spent)
			}
			if want := time.Duration(float64(work) * (1 - share) / share); burst == 0 && i > 0 && start.Equal(sections[i-1].restEnd) && absDiff(rest, want) > time.Microsecond {
				t.Fatalf("no burst: a section of %s right after a rest rested %s, want %s", work, rest, want)
			}
			now = end.Add(rest)
			sections = append(sections, section{start: start, restEnd: now, work: work})
		}
		for i := range sections {
			var work time.Duration
			for j := i; j < len(sections); j++ {
				work += sections[j].work
				span := sections[j].restEnd.Sub(sections[i].start)
				if limit := burst + time.Duration(float64(span)*share); work > limit+time.Microsecond {
					t.Fatalf("burst %s: sections %d to %d worked %s in %s, over %s", burst, i, j, work, span, limit)
				}
			}
		}
	}
}

// TestWorkBucketForgivesBeyondTheLongestRest: a section far over the
// burst rests maxRest, not its whole debt, and the section after that
// rest pays only its own.
func TestWorkBucketForgivesBeyondTheLongestRest(t *testing.T) {
	b := workBucket{share: 0.1}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if rest := b.spend(now, now.Add(10*time.Second)); rest != maxRest {
		t.Fatalf("a 10s section rested %s, want %s", rest, maxRest)
	}
	start := now.Add(10*time.Second + maxRest)
	if rest := b.spend(start, start.Add(2*time.Millisecond)); rest != 18*time.Millisecond {
		t.Errorf("the 2ms section after it rested %s, want 18ms", rest)
	}
}

func absDiff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}
