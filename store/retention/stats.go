package retention

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/metadatad/metadatad/store/images"
)

// Stats are what this engine's purges have done since it opened, for
// monitoring. They count in this process only; the store keeps each job's
// lasting record.
type Stats struct {
	// Running is how many jobs this engine is running now.
	Running int
	// Ended counts the jobs this engine ended, by final state, dry runs included.
	Ended map[State]int64
	// RowsDeleted counts the rows this engine's purges deleted, by table
	// name (primary and index tables), as they delete them: each embedded
	// section, or task, once its deletes are recorded with the job.
	RowsDeleted map[string]int64
	// DevicesFailed counts the cameras the ended jobs could not purge.
	DevicesFailed int64
}

// Stats returns a copy of the engine's counts.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Running = len(e.running)
	s.Ended = maps.Clone(e.stats.Ended)
	s.RowsDeleted = maps.Clone(e.stats.RowsDeleted)
	return s
}

// countEnded adds a job that this engine ended to the stats.
func (e *Engine) countEnded(j *Job) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stats.Ended == nil {
		e.stats.Ended = map[State]int64{}
	}
	e.stats.Ended[j.State]++
	for _, p := range j.Kinds {
		e.stats.DevicesFailed += p.Counts.DevicesFailed
	}
}

// countDeleted adds rows a purge of kind deleted, and recorded, to the
// stats, so that a long purge shows its progress before it ends.
func (e *Engine) countDeleted(kind images.Kind, c Counts) {
	repo, ok := e.repos[kind]
	if !ok || (c.MetadataRows == 0 && c.IndexRows == 0) {
		return
	}
	primary, index := repo.Tables()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stats.RowsDeleted == nil {
		e.stats.RowsDeleted = map[string]int64{}
	}
	e.stats.RowsDeleted[primary.Name()] += c.MetadataRows
	e.stats.RowsDeleted[index.Name()] += c.IndexRows
}

// recentJobs is how many of the newest jobs Status looks through.
const recentJobs = 100

// Status is the store's view of retention, the same from every replica.
type Status struct {
	// LastSucceeded is when the latest successful purge (not a dry run) of
	// each kind ended, among the most recent jobs; a kind without one is missing.
	LastSucceeded map[images.Kind]time.Time
	// Retention is how far back the latest purge (not a dry run) cut: the
	// time it was created minus its cutoff; 0 without one, or when it used
	// policies, whose cameras have cutoffs and thinning tiers of their own.
	Retention time.Duration
	// FirstPurge is when the oldest purge (not a dry run) among the most
	// recent jobs was created, whatever its end; zero without one. A store
	// whose purges all fail has been without a success since then.
	FirstPurge time.Time
	// Held says some camera is on legal hold: its rows are kept past any
	// cutoff, so an old row is no sign of a purge behind.
	Held bool
	// Oldest is the capture minute of each kind's oldest indexed rows, the
	// next rows a purge would retire; a kind without rows is missing.
	Oldest map[images.Kind]time.Time
}

// Status reads the latest purges, whether any hold is in force and the
// oldest row of each kind: one page of jobs, one of holds and one
// single-row scan of each index.
func (e *Engine) Status(ctx context.Context) (Status, error) {
	s := Status{LastSucceeded: map[images.Kind]time.Time{}, Oldest: map[images.Kind]time.Time{}}
	jobs, _, err := e.jobs.list(ctx, "", recentJobs, nil)
	if err != nil {
		return Status{}, err
	}
	latest := true
	for _, j := range jobs {
		if j.DryRun {
			continue
		}
		if latest && !j.UsePolicies {
			s.Retention = j.Created.Sub(j.Cutoff)
		}
		latest = false
		s.FirstPurge = j.Created
		if j.State != Succeeded {
			continue
		}
		for _, k := range j.ImageKinds() {
			if j.Ended.After(s.LastSucceeded[k]) {
				s.LastSucceeded[k] = j.Ended
			}
		}
	}
	holds, _, err := e.policies.ListHolds(ctx, 1, nil)
	if err != nil {
		return Status{}, fmt.Errorf("retention: reading holds: %w", err)
	}
	s.Held = len(holds) > 0
	for kind, repo := range e.repos {
		oldest, ok, err := repo.OldestIndexed(ctx)
		if err != nil {
			return Status{}, fmt.Errorf("retention: oldest %s index row: %w", kind, err)
		}
		if ok {
			s.Oldest[kind] = oldest
		}
	}
	return s, nil
}
