package retention_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
)

// TestRetireJobsRetiresAJobWrittenSinceItsRead: a job's record written
// between RetireJobs' read of it and its delete (its version changed) is
// read again and retired, since it is still ended before the horizon. CI
// once saw the queue design's retirement fail on Azurite with such a
// conflict (412), leaving the job and its outbox for the next hour's run.
func TestRetireJobsRetiresAJobWrittenSinceItsRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		log := slog.New(slog.DiscardHandler)
		db, repo := openOneExpiredImage(t)
		var skew atomic.Int64
		var rewrites atomic.Int64
		driver := func(ctx context.Context, env *retention.Env) (retention.Driver, error) {
			d, err := embedded.New(ctx, env)
			return &dropHook{Driver: d, dropped: func(ctx context.Context, id string) {
				// Another write of the ended job, after RetireJobs read it.
				if _, err := env.UpdateJob(ctx, id, func(*retention.Job) error { return nil }); err != nil {
					t.Error(err)
				}
				rewrites.Add(1)
			}}, err
		}
		e, err := retention.Open(ctx, retention.Options{Backend: db, Repositories: []*images.Repository{repo}, Driver: driver, Logger: log,
			JobRetention: 24 * time.Hour, Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
		if err != nil {
			t.Fatal(err)
		}
		j, err := e.Start(ctx, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: time.Now().AddDate(0, 0, -7)})
		if err != nil {
			t.Fatal(err)
		}
		for !j.State.Terminal() {
			if _, err := e.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if j, err = e.Get(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
		}
		skew.Store(int64(48 * time.Hour))
		if n, err := e.RetireJobs(ctx); n != 1 || err != nil {
			t.Fatalf("RetireJobs retired %d jobs, %v; want the one, rewritten %d times meanwhile", n, err, rewrites.Load())
		}
		if _, err := e.Get(ctx, j.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the retired job: %v, want not found", err)
		}
	})
}

// dropHook calls dropped after the driver drops a job's state: within
// RetireJobs, between its read of the job and its delete.
type dropHook struct {
	retention.Driver
	dropped func(ctx context.Context, id string)
}

func (h *dropHook) DropJob(ctx context.Context, id string) error {
	if err := h.Driver.DropJob(ctx, id); err != nil {
		return err
	}
	h.dropped(ctx, id)
	return nil
}
