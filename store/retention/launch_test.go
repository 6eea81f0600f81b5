package retention_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/embedded"
)

// TestAStartMetByARunOnceRunsAtOnce: a RunOnce of the engine's loop that
// lists a job while its Start is still confirming it holds the job's
// claim while it finds it unconfirmed and leaves it. The Start's launch,
// meeting that claim, must not be lost: the job runs as soon as that
// RunOnce lets go, not a lease later at the loop's next tick (a purge
// started in that instant waited 30 s).
func TestAStartMetByARunOnceRunsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		db, repo := openOneExpiredImage(t)
		backend := &heldJobReads{DB: db, release: make(chan struct{})}
		var e *retention.Engine
		var hooked atomic.Bool
		driver := func(ctx context.Context, env *retention.Env) (retention.Driver, error) {
			d, err := embedded.New(ctx, env)
			return &startHook{Driver: d, started: func(ctx context.Context) {
				if hooked.Swap(true) {
					return
				}
				// The loop's RunOnce, between the job's record and its
				// confirmation: its run reads the job unconfirmed and
				// is held there until the Start is done.
				backend.hold.Store(true)
				if _, err := e.RunOnce(ctx); err != nil {
					t.Error(err)
				}
				synctest.Wait()
			}}, err
		}
		const lease = time.Minute
		var err error
		e, err = retention.Open(ctx, retention.Options{Backend: backend, Repositories: []*images.Repository{repo}, Driver: driver,
			LeaseDuration: lease, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(context.WithValue(ctx, engineLoop{}, true))
		defer stop()
		go func() { _ = e.Run(runCtx) }()
		synctest.Wait()

		began := time.Now()
		j, err := e.Start(ctx, retention.StartRequest{Kinds: []images.Kind{images.Single}, Cutoff: time.Now().AddDate(0, 0, -7)})
		if err != nil {
			t.Fatal(err)
		}
		if !hooked.Load() {
			t.Fatal("the start hook never ran")
		}
		close(backend.release)
		for !j.State.Terminal() {
			time.Sleep(time.Second)
			if j, err = e.Get(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
		}
		if j.State != retention.Succeeded || j.Totals().MetadataRows != 1 {
			t.Fatalf("purge ended %s with %d rows (%s), want succeeded with 1", j.State, j.Totals().MetadataRows, j.Error)
		}
		if took := j.Started.Sub(began); took >= lease/2 {
			t.Errorf("the job started %s after its Start, want at once (the loop ticks every %s)", took, lease)
		}
	})
}

// startHook calls started as a job's Start records it, before confirming it.
// openOneExpiredImage opens an in-memory store, closed when the test
// ends, with the single images' repository and one image of a month ago.
func openOneExpiredImage(t *testing.T) (*pebble.DB, *images.Repository) {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: "db", FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	repo, err := images.Open(t.Context(), db, images.Options{Kind: images.Single})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Create(t.Context(), images.Image{CameraID: "cam", CapturedAt: time.Now().AddDate(0, -1, 0), BlobURI: "https://images.example/1.jpg"}); err != nil {
		t.Fatal(err)
	}
	return db, repo
}

type startHook struct {
	retention.Driver
	started func(context.Context)
}

func (h *startHook) StartJob(ctx context.Context, j *retention.Job) error {
	if err := h.Driver.StartJob(ctx, j); err != nil {
		return err
	}
	h.started(ctx)
	return nil
}

// heldJobReads holds the first read of a job by the engine's loop (a ctx
// with engineLoop) once hold is set: the read is made, and its answer
// given once release is closed.
type heldJobReads struct {
	*pebble.DB
	hold    atomic.Bool
	release chan struct{}
}

func (b *heldJobReads) Table(ctx context.Context, name string) (store.Table, error) {
	t, err := b.DB.Table(ctx, name)
	if err != nil || name != retention.DefaultJobsTable {
		return t, err
	}
	return &heldJobTable{Table: t, b: b}, nil
}

// engineLoop marks the context of the engine's Run.
type engineLoop struct{}

type heldJobTable struct {
	store.Table
	b *heldJobReads
}

func (t *heldJobTable) Get(ctx context.Context, partitionKey, rowKey string) (store.Entity, error) {
	e, err := t.Table.Get(ctx, partitionKey, rowKey)
	if ctx.Value(engineLoop{}) != nil && t.b.hold.CompareAndSwap(true, false) {
		<-t.b.release
	}
	return e, err
}
