package fleet

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// DefaultInterval is how often, at most, a Recorder writes a camera's row.
const DefaultInterval = 5 * time.Minute

// writeAttempts bounds the rounds of a camera row's read and conditional
// write when other replicas write it meanwhile.
const writeAttempts = 3

// RecorderOptions configures NewRecorder.
type RecorderOptions struct {
	// Table is the camera table; required.
	Table store.Table
	// Interval is the least time between two writes of one camera's row by
	// this process; 0 means DefaultInterval.
	Interval time.Duration
	// Now is the clock the interval is measured on; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Recorder keeps the camera table of one image kind: a row per camera
// with the first and latest capture it was told of. A camera's first image
// in this process writes its row at once; later images only widen what is
// pending, which the next write after Interval carries: by the create that
// finds the interval passed, or by RunOnce for a camera that went quiet. So
// a row's latest capture lags the newest image by at most Interval (plus
// RunOnce's period) and a fleet of n cameras costs at most n writes per
// Interval per replica.
type Recorder struct {
	table    store.Table
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger

	mu      sync.Mutex
	cameras map[string]*camState
}

// camState is what this process knows of one camera.
type camState struct {
	// first and latest are what the row held after this process's last write.
	first, latest time.Time
	// pendFirst and pendLatest widen the row at the next write; zero when
	// nothing is pending.
	pendFirst, pendLatest time.Time
	written               time.Time
	writing               bool
}

// NewRecorder makes a recorder of the camera table.
func NewRecorder(opts RecorderOptions) (*Recorder, error) {
	if opts.Table == nil {
		return nil, errors.New("fleet: RecorderOptions.Table is required")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Recorder{table: opts.Table, interval: opts.Interval, now: opts.Now, log: opts.Logger, cameras: map[string]*camState{}}, nil
}

// Created is told of each stored image (images.Options.Created). It writes
// the camera's row when the camera is new to this process or its interval
// has passed, else notes the capture for a later write. A failed write is
// logged and retried by the next one: the image itself is stored.
func (r *Recorder) Created(ctx context.Context, img images.Image) {
	at := img.CapturedAt.UTC()
	r.mu.Lock()
	s := r.cameras[img.CameraID]
	if s == nil {
		s = &camState{}
		r.cameras[img.CameraID] = s
	}
	if !s.written.IsZero() && !at.Before(s.first) && !at.After(s.latest) {
		r.mu.Unlock()
		return
	}
	s.pend(at)
	due := !s.writing && (s.written.IsZero() || r.now().Sub(s.written) >= r.interval)
	r.mu.Unlock()
	if due {
		r.write(ctx, img.CameraID)
	}
}

func (s *camState) pend(at time.Time) {
	if s.pendFirst.IsZero() || at.Before(s.pendFirst) {
		s.pendFirst = at
	}
	if at.After(s.pendLatest) {
		s.pendLatest = at
	}
}

// RunOnce writes the rows of the cameras with captures pending whose
// interval has passed, and returns how many it wrote.
func (r *Recorder) RunOnce(ctx context.Context) (int, error) {
	var due []string
	r.mu.Lock()
	now := r.now()
	for id, s := range r.cameras {
		if !s.pendLatest.IsZero() && !s.writing && now.Sub(s.written) >= r.interval {
			due = append(due, id)
		}
	}
	r.mu.Unlock()
	n := 0
	var errs []error
	for _, id := range due {
		if err := r.write(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Run calls RunOnce every interval until ctx ends.
func (r *Recorder) Run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("fleet: writing camera rows", "table", r.table.Name(), "err", err)
			}
		}
	}
}

// write takes the camera's pending captures and widens its row by them;
// on failure they are pending again.
func (r *Recorder) write(ctx context.Context, id string) error {
	r.mu.Lock()
	s := r.cameras[id]
	first, latest := s.pendFirst, s.pendLatest
	s.pendFirst, s.pendLatest, s.writing = time.Time{}, time.Time{}, true
	r.mu.Unlock()
	stored, err := r.widen(ctx, id, first, latest)
	r.mu.Lock()
	defer r.mu.Unlock()
	s.writing = false
	if err != nil {
		s.pend(first)
		s.pend(latest)
		r.log.Warn("fleet: writing a camera row", "table", r.table.Name(), "camera_id", id, "err", err)
		return err
	}
	s.first, s.latest, s.written = stored.first, stored.latest, r.now()
	return nil
}

// widen makes the camera's row span first and latest: read, then insert
// or update on the ETag read, again if another replica wrote in between.
func (r *Recorder) widen(ctx context.Context, id string, first, latest time.Time) (camState, error) {
	var err error
	for range writeAttempts {
		var row store.Entity
		row, err = r.table.Get(ctx, id, cameraRowKey)
		switch {
		case errors.Is(err, store.ErrNotFound):
			_, err = r.table.Insert(ctx, cameraEntity(id, first, latest))
		case err != nil:
			return camState{}, err
		default:
			f, _ := row.Properties[propFirst].(time.Time)
			l, _ := row.Properties[propLatest].(time.Time)
			if !f.IsZero() {
				first = store.MinTime(first, f)
			}
			latest = store.MaxTime(latest, l)
			if first.Equal(f) && latest.Equal(l) {
				return camState{first: first, latest: latest}, nil
			}
			_, err = r.table.Update(ctx, cameraEntity(id, first, latest), store.Replace, row.ETag)
		}
		if err == nil {
			return camState{first: first, latest: latest}, nil
		}
		if !errors.Is(err, store.ErrAlreadyExists) && !errors.Is(err, store.ErrConflict) {
			return camState{}, err
		}
	}
	return camState{}, err
}

func cameraEntity(id string, first, latest time.Time) store.Entity {
	return store.Entity{PartitionKey: id, RowKey: cameraRowKey, Properties: store.Properties{propFirst: first, propLatest: latest}}
}
