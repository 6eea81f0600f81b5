package retention

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// Partitions of the jobs table: every job; a marker per job not yet ended,
// so that resuming reads the few live jobs rather than all of history; and
// a lock per image kind.
const (
	jobPartition    = "job"
	activePartition = "active"
	lockPartition   = "lock"
)

// Property names of job and lock entities. State and Created are kept as
// typed properties for operators browsing the table; Doc holds the job.
const (
	propState   = "State"
	propCreated = "Created"
	propDoc     = "Doc"
	propJobID   = "JobID"
)

// casAttempts bounds the retries of an optimistic update that keeps losing
// races; a healthy store never needs more than a few.
const casAttempts = 100

// ErrPurgeRunning reports a purge that overlaps a running one.
var ErrPurgeRunning = errors.New("retention: a purge of the same image type is running")

// RunningError names the running purge that a new one overlaps.
type RunningError struct {
	JobID string
	Kind  images.Kind
}

func (e *RunningError) Error() string {
	return fmt.Sprintf("%v: purge %s is purging %s images", ErrPurgeRunning, e.JobID, e.Kind)
}

func (e *RunningError) Unwrap() error { return ErrPurgeRunning }

// jobStore keeps jobs, newest first, and the per-kind locks.
type jobStore struct {
	table store.Table
}

// newJobID sorts newest first: the high part counts down with creation time.
func newJobID(created time.Time) string {
	var tail [2]byte
	_, _ = rand.Read(tail[:])
	return fmt.Sprintf("%s%04x", jobIDPrefix(created), binary.BigEndian.Uint16(tail[:]))
}

func jobEntity(j *Job) (store.Entity, error) {
	doc, err := json.Marshal(j)
	if err != nil {
		return store.Entity{}, fmt.Errorf("retention: encode job: %w", err)
	}
	return store.Entity{PartitionKey: jobPartition, RowKey: j.ID, Properties: store.Properties{
		propState: string(j.State), propCreated: j.Created, propDoc: string(doc),
	}}, nil
}

func jobFromEntity(e store.Entity) (*Job, error) {
	doc, _ := e.Properties[propDoc].(string)
	var j Job
	if err := json.Unmarshal([]byte(doc), &j); err != nil {
		return nil, fmt.Errorf("retention: decode job %s: %w", e.RowKey, err)
	}
	return &j, nil
}

// create records a new job. Its active marker goes first: a marker without
// a job is dropped at the next resume, while a job without its marker would
// never resume. A retried insert whose first attempt landed succeeds.
func (s *jobStore) create(ctx context.Context, j *Job) error {
	if _, err := s.table.Upsert(ctx, store.Entity{PartitionKey: activePartition, RowKey: j.ID}, store.Replace); err != nil {
		return err
	}
	e, err := jobEntity(j)
	if err != nil {
		return err
	}
	if _, err = s.table.Insert(ctx, e); errors.Is(err, store.ErrAlreadyExists) {
		_, err = store.ResolveInsert(ctx, s.table, e) // ids are random: an equal job there is this one
	}
	return err
}

// remove deletes a job that could not start, and its marker.
func (s *jobStore) remove(ctx context.Context, id string) error {
	if err := s.table.Delete(ctx, jobPartition, id, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return s.deactivate(ctx, id)
}

// deactivate drops the marker of a job that has ended.
func (s *jobStore) deactivate(ctx context.Context, id string) error {
	if err := s.table.Delete(ctx, activePartition, id, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

func (s *jobStore) get(ctx context.Context, id string) (*Job, string, error) {
	if store.ValidateKey(id) != nil {
		return nil, "", fmt.Errorf("retention: job %q: %w", id, store.ErrNotFound)
	}
	e, err := s.table.Get(ctx, jobPartition, id)
	if err != nil {
		return nil, "", fmt.Errorf("retention: job %q: %w", id, err)
	}
	j, err := jobFromEntity(e)
	return j, e.ETag, err
}

// update applies change to the stored job with optimistic concurrency,
// retrying on conflicting writers, and returns the job as written.
func (s *jobStore) update(ctx context.Context, id string, change func(*Job) error) (*Job, error) {
	j, _, err := s.updateStamped(ctx, id, change)
	return j, err
}

// updateStamped is update that also returns the backend's timestamp of the
// write: the backend's clock, read without trusting this process's.
//
// Made by the run of the job (ctx holds its lease), the write holds only
// if the job is still under that lease: ErrLeaseLost else. The check and
// the write are one, as the write is conditional on the version checked.
func (s *jobStore) updateStamped(ctx context.Context, id string, change func(*Job) error) (*Job, time.Time, error) {
	for range casAttempts {
		j, etag, err := s.get(ctx, id)
		if err != nil {
			return nil, time.Time{}, err
		}
		if err := checkLease(ctx, j); err != nil {
			return nil, time.Time{}, err
		}
		if err := change(j); err != nil {
			return nil, time.Time{}, err
		}
		e, err := jobEntity(j)
		if err != nil {
			return nil, time.Time{}, err
		}
		written, err := s.table.Update(ctx, e, store.Replace, etag)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return j, written.Timestamp, err
	}
	return nil, time.Time{}, fmt.Errorf("retention: job %s: too many concurrent updates: %w", id, store.ErrConflict)
}

// list returns one page of jobs, newest first; only those in state unless
// it is empty.
func (s *jobStore) list(ctx context.Context, state State, limit int, resume *store.Cursor) ([]*Job, *store.Cursor, error) {
	var where []store.Equal
	if state != "" {
		where = []store.Equal{{Property: propState, Value: string(state)}}
	}
	return store.ReadPage(limit, resume, func(resume *store.Cursor, limit int) (store.Page, error) {
		return s.table.Query(ctx, store.Query{PartitionKey: jobPartition, Where: where, Resume: resume, Limit: limit})
	}, jobFromEntity)
}

// staleMarker is how old an active marker without its job must be before
// resumption drops it: younger, its job may be being created right now.
const staleMarker = 10 * time.Minute

// unfinished lists the jobs not yet ended, oldest first, for resumption,
// dropping the markers of jobs that ended, or that were never created.
func (s *jobStore) unfinished(ctx context.Context, now time.Time) ([]*Job, error) {
	var out []*Job
	q := store.Query{PartitionKey: activePartition}
	for {
		page, err := s.table.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, marker := range page.Entities {
			j, _, err := s.get(ctx, marker.RowKey)
			missing := errors.Is(err, store.ErrNotFound)
			if err != nil && !missing {
				return nil, err
			}
			if missing && marker.Timestamp.After(now.Add(-staleMarker)) {
				continue
			}
			if missing || j.State.Terminal() {
				if err := s.deactivate(ctx, marker.RowKey); err != nil {
					return nil, err
				}
				continue
			}
			out = append([]*Job{j}, out...) // ids sort newest first
		}
		if page.Next == nil {
			return out, nil
		}
		q.Resume = page.Next
	}
}

// lock makes j the holder of its kinds' locks, in one batch so that two
// overlapping purges cannot each take a part. A lock held by a job that has
// ended, or that no longer exists, is free.
func (s *jobStore) lock(ctx context.Context, j *Job) error {
	for range casAttempts {
		var ops []store.Op
		for _, kind := range j.ImageKinds() {
			op, err := s.lockOp(ctx, j.ID, kind)
			if err != nil {
				return err
			}
			if op != nil {
				ops = append(ops, *op)
			}
		}
		err := s.table.Batch(ctx, ops)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrAlreadyExists) || errors.Is(err, store.ErrNotFound) {
			continue // another purge moved a lock between our read and write
		}
		return err
	}
	return fmt.Errorf("retention: locks of job %s: too many concurrent updates: %w", j.ID, store.ErrConflict)
}

// lockOp is the batch operation that gives kind's lock to jobID, nil if it
// holds it already, or a *RunningError if a running job holds it.
func (s *jobStore) lockOp(ctx context.Context, jobID string, kind images.Kind) (*store.Op, error) {
	lock := store.Entity{PartitionKey: lockPartition, RowKey: kind.String(), Properties: store.Properties{propJobID: jobID}}
	held, err := s.table.Get(ctx, lockPartition, kind.String())
	if errors.Is(err, store.ErrNotFound) {
		return &store.Op{Kind: store.OpInsert, Entity: lock}, nil
	}
	if err != nil {
		return nil, err
	}
	holder, _ := held.Properties[propJobID].(string)
	if holder == jobID {
		return nil, nil
	}
	other, _, err := s.get(ctx, holder)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	case !other.State.Terminal():
		return nil, &RunningError{JobID: holder, Kind: kind}
	}
	return &store.Op{Kind: store.OpUpdate, Mode: store.Replace, Entity: lock, IfMatch: held.ETag}, nil
}
