package retention_test

import (
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/retentiontest"
)

// TestPurgePacesEveryDeletedRow: a capped purge asks every cap in force,
// the process's (Options.RowsPerSecond) and the job's own
// (StartRequest.RowsPerSecond), to admit each row it deletes, primary and
// index rows alike, so the lower cap bounds it whichever of the two it is;
// a dry run deletes nothing and asks nothing. The rows asked for are
// counted rather than the purge timed: a purge of a few rows is over
// within one burst, however it is paced. The caps are low enough that
// the purge outgrows their bursts, so the limiters do wait.
func TestPurgePacesEveryDeletedRow(t *testing.T) {
	t.Parallel() // independent: stores and engines of its own
	cases := []struct {
		name         string
		process, job float64
	}{
		{"process cap", 200, 0},
		{"job cap", 0, 200},
		{"job cap below the process's", 400, 200},
		{"job cap above the process's", 200, 400},
	}
	forEachStore(t, func(t *testing.T, open func(*testing.T, retentiontest.Options) *fixture) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				opts := quickOptions()
				opts.RowsPerSecond = c.process
				// No redelivery, which would ask again for a task's rows.
				opts.VisibilityTimeout = patience
				f := open(t, opts)
				var mu sync.Mutex
				asked := map[float64]int64{}
				retention.CountPacedRows(f.Engine, func(perSecond float64, rows int) {
					mu.Lock()
					defer mu.Unlock()
					asked[perSecond] += int64(rows)
				})
				f.Seed(t, cameras)
				f.Run(t)
				req := retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff, RowsPerSecond: c.job, DryRun: true}
				if j := f.Purge(t, req); j.State != retention.Succeeded {
					t.Fatalf("dry run ended %s (%s)", j.State, j.Error)
				}
				mu.Lock()
				if len(asked) != 0 {
					t.Errorf("a dry run asked the pacer for %v", asked)
				}
				mu.Unlock()

				req.DryRun = false
				j := f.Purge(t, req)
				wantCounts(t, "capped purge", j.Totals(), expiredCounts(1))
				deleted := j.Totals().MetadataRows + j.Totals().IndexRows
				want := map[float64]int64{}
				for _, perSecond := range []float64{c.process, c.job} {
					if perSecond > 0 {
						want[perSecond] = deleted
					}
				}
				mu.Lock()
				defer mu.Unlock()
				if !maps.Equal(asked, want) {
					t.Errorf("rows asked of each cap (rows/s: rows) %v, want %v: every deleted row of each cap in force", asked, want)
				}
			})
		}
	})
}

// TestReplicaFreesTheLimiterOfAnEndedJob: every replica whose workers run
// tasks of a job with its own cap makes the job a limiter; the replica
// running the job frees its own as the job ends, and the others free
// theirs once they see it ended, so a fleet's long run of capped purges
// leaves no limiter behind on any replica.
func TestReplicaFreesTheLimiterOfAnEndedJob(t *testing.T) {
	forEachQueueStore(t, func(t *testing.T, newFixture func(*testing.T, retentiontest.Options) *fixture) {
		const cameras = 12
		a := newFixture(t, quickOptions())
		a.Seed(t, cameras)
		primary, _ := a.Repo(images.Single).Tables()

		// As in TestTwoReplicasShareAPurge, each replica's first delete
		// waits until the other has reached one too, so both run tasks of
		// the job, and each notes at it whether it holds the job's
		// limiter, made just before (its pacing precedes its deletes).
		entered := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
		once := map[string]*sync.Once{"a": {}, "b": {}}
		var mu sync.Mutex
		held := map[string]int{}
		var b *fixture
		engineOf := func(me string) *retention.Engine {
			if me == "a" {
				return a.Engine
			}
			return b.Engine
		}
		gate := func(me, other string) func(table, op string, _ []store.Key) error {
			return func(table, op string, _ []store.Key) error {
				if table != primary.Name() || (op != "delete-ranges" && op != "batch-delete") {
					return nil
				}
				once[me].Do(func() {
					mu.Lock()
					held[me] = retention.JobLimiters(engineOf(me))
					mu.Unlock()
					close(entered[me])
				})
				select {
				case <-entered[other]:
				case <-time.After(patience):
					t.Errorf("replica %s never took a task", other)
				}
				return nil
			}
		}
		optsA, optsB := quickOptions(), quickOptions()
		optsA.ReplicaID, optsB.ReplicaID = "replica-a", "replica-b"
		optsA.VisibilityTimeout, optsB.VisibilityTimeout = time.Minute, time.Minute
		optsA.Workers, optsB.Workers = 2, 2
		a.Opts = optsA
		a.OpenEngine(t, &hookedBackend{Backend: a.Base, Before: gate("a", "b")})
		b = &fixture{Base: a.Base, Queue: a.Queue, Opts: optsB, AzureEngine: a.AzureEngine, Clock: a.Clock, Harness: a.Harness}
		b.OpenEngine(t, &hookedBackend{Backend: a.Base, Before: gate("b", "a")})
		a.Run(t)
		b.Run(t)

		j := a.Purge(t, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: cutoff, RowsPerSecond: 1_000_000})
		if j.State != retention.Succeeded {
			t.Fatalf("job %s (%s)", j.State, j.Error)
		}
		mu.Lock()
		first := maps.Clone(held)
		mu.Unlock()
		if first["a"] != 1 || first["b"] != 1 {
			t.Fatalf("limiters held at each replica's first delete %v, want one on each", first)
		}
		deadline := time.After(patience)
		for retention.JobLimiters(a.Engine)+retention.JobLimiters(b.Engine) != 0 {
			select {
			case <-a.Engine.Changed():
			case <-time.After(10 * time.Millisecond):
			case <-deadline:
				t.Fatalf("%v after the job ended, replica a holds %d limiters and b %d, want none (%s ran the job)",
					patience, retention.JobLimiters(a.Engine), retention.JobLimiters(b.Engine), j.Owner)
			}
		}
	})
}

// TestPacedPurgeTakesItsRowsOverItsRate: a purge capped at R rows a second
// deletes its N expired rows in (N-burst)/R seconds at the least, where the
// burst is a tenth of a second's rows, and not much longer: the cap is a
// rate, not only a count of rows asked. It runs in a synctest bubble, where
// the limiter's waits are virtual: the purge's own time is exact and costs
// no wall-clock time. An unpaced purge of the same rows takes no virtual
// time beyond the engine's polls. The live cap (the queue design's) paces
// only while requests are served (Options.Live): on an idle store it
// leaves the purge unpaced.
func TestPacedPurgeTakesItsRowsOverItsRate(t *testing.T) {
	t.Parallel() // independent: bubbles and stores of their own
	kind := images.Single
	const rate = 40.0
	cases := []struct {
		name         string
		process, job float64
		// live is the cap while requests are served, serving whether
		// they are.
		live    float64
		serving bool
	}{
		{"unpaced", 0, 0, 0, false},
		{"process cap", rate, 0, 0, false},
		{"job cap", 0, rate, 0, false},
		{"job cap below the process's", 2 * rate, rate, 0, false},
		{"live cap while serving", 0, 0, rate, true},
		{"live cap on an idle store", 0, 0, rate, false},
		{"live cap below the process's", 2 * rate, 0, rate, true},
		{"live cap above the job's", 0, rate, 2 * rate, true},
	}
	for _, s := range []struct {
		name        string
		azureEngine bool
	}{{"pebble", false}, {"pebble-queue", true}} {
		for _, c := range cases {
			if c.live > 0 && !s.azureEngine {
				continue // the embedded purge paces by time while serving (embedded's pace_test.go)
			}
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					opts := quickOptions()
					opts.RowsPerSecond = c.process
					opts.LiveRowsPerSecond, opts.Live = c.live, func() bool { return c.serving }
					opts.PollInterval, opts.VisibilityTimeout = time.Second, time.Minute
					f := newBubbleFixture(t, opts, s.azureEngine)
					f.SeedKinds(t, 10, []images.Kind{kind})
					before := f.Census(t, kind, base.Add(2*time.Minute))
					f.Run(t)
					j := f.Purge(t, retention.StartRequest{Kinds: []images.Kind{kind}, Cutoff: cutoff, RowsPerSecond: c.job})
					f.Stop()
					if j.State != retention.Succeeded {
						t.Fatalf("state %s (%s)", j.State, j.Error)
					}
					rows := j.Totals().MetadataRows + j.Totals().IndexRows
					if want := before.PrimaryOld + before.IndexOld; rows != want || rows < 100 {
						t.Fatalf("purge deleted %d rows, %d expired (want at least 100, to outgrow the burst)", rows, want)
					}
					took := j.Ended.Sub(j.Started)
					t.Logf("%d rows in %s of virtual time", rows, took)
					// Polls for tasks add at most one PollInterval, paced or
					// not; pacing twice (one cap's wait after the other's)
					// would add a third of the time.
					slack := opts.PollInterval
					if c.process == 0 && c.job == 0 && !c.serving {
						if took > slack {
							t.Errorf("unpaced purge of %d rows took %s of virtual time, want at most %s", rows, took, slack)
						}
						return
					}
					// The binding cap's first burst goes at once: a tenth of
					// a second of rows, half a second's for the live cap.
					burst := int64(rate / 10)
					if c.serving && c.live == rate {
						burst = int64(rate / 2)
					}
					least := time.Duration(float64(rows-burst) / rate * float64(time.Second))
					if took < least || took > least+slack {
						t.Errorf("purge of %d rows at %v rows a second took %s, want %s to %s", rows, rate, took, least, least+slack)
					}
				})
			})
		}
	}
}
