package watchfeed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// Run tails the store every Options.Poll until ctx ends, feeding the new
// images of watched cameras; a failed pass is logged and the next one tries
// again. Without Poll it returns at once.
func (f *Feed) Run(ctx context.Context) {
	t := f.tail
	if t == nil {
		return
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if err := t.pass(ctx); err != nil && ctx.Err() == nil {
			f.log.WarnContext(ctx, "watchfeed: tail pass failed; trying again", "kind", f.repo.Kind(), "err", err)
		}
		timer.Reset(f.poll)
	}
}

// tail is the state of Run between passes: what it knows of each watched
// camera, and nothing of the others.
type tail struct {
	feed *Feed
	// passing makes passes run one at a time: a pass owns the maps of the
	// cameraStates it applies its reads to.
	passing sync.Mutex
	// cameras holds the state of each watched camera, guarded by feed.mu.
	// The Subscribe that first watches a camera adds it, after reading what
	// exists of it; the Close of its last subscription removes it.
	cameras map[string]*cameraState
}

// cameraState is what the tail knows of one watched camera.
type cameraState struct {
	// seen holds the primary row keys of the camera's images within the
	// window that existed when it came to be watched or were fed since,
	// with their capture instants, so that none is fed (again).
	seen map[string]time.Time
	// missing holds when an index scan first found each index row of the
	// camera without its primary row (by primary row key): a create writes
	// its index row first. Scans look for it again for the index lag.
	missing map[string]time.Time
}

func newTail(f *Feed) *tail {
	return &tail{feed: f, cameras: make(map[string]*cameraState)}
}

// readCamera reads what exists of a camera newly watched, at now.
func (t *tail) readCamera(ctx context.Context, camera string, now time.Time) (*cameraState, error) {
	imgs, err := t.feed.cameraImages(ctx, camera, t.feed.windowOf(now))
	if err != nil {
		return nil, fmt.Errorf("watchfeed: read camera %s: %w", camera, err)
	}
	st := &cameraState{seen: make(map[string]time.Time, len(imgs)), missing: make(map[string]time.Time)}
	for _, img := range imgs {
		st.seen[img.RowKey] = img.CapturedAt
	}
	return st, nil
}

// found is an image a pass read, and the state of its camera when the pass
// began: a camera watched anew since has its own state, and the image is
// not fed to it.
type found struct {
	state *cameraState
	img   images.Image
}

// absent is an index row a scan found without its primary row.
type absent struct {
	state  *cameraState
	rowKey string
}

// pass reads the new images of the watched cameras once, outside the feed's
// lock, then feeds them under it. With no camera watched it reads nothing.
// It reads each camera's primary partition, or the index when that is
// fewer requests (see Feed.byCamera).
func (t *tail) pass(ctx context.Context) error {
	t.passing.Lock()
	defer t.passing.Unlock()
	f := t.feed
	f.mu.Lock()
	now := f.now()
	states := maps.Clone(t.cameras)
	f.mu.Unlock()
	if len(states) == 0 {
		return nil
	}
	window := f.windowOf(now)
	var imgs []found
	var missing []absent
	var err error
	if f.byCamera(len(states), window) {
		imgs, err = t.readCameras(ctx, states, window)
	} else {
		imgs, missing, err = t.readIndex(ctx, states, window)
	}
	if err != nil {
		return err
	}
	t.apply(imgs, missing, window, now)
	return nil
}

// readCameras reads every image of the window of each camera of states.
func (t *tail) readCameras(ctx context.Context, states map[string]*cameraState, window captureRange) ([]found, error) {
	cameras := slices.Sorted(maps.Keys(states))
	read := make([][]images.Image, len(cameras))
	err := inParallel(ctx, len(cameras), func(ctx context.Context, i int) error {
		var err error
		read[i], err = t.feed.cameraImages(ctx, cameras[i], window)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("watchfeed: read cameras: %w", err)
	}
	var out []found
	for i, camera := range cameras {
		for _, img := range read[i] {
			out = append(out, found{state: states[camera], img: img})
		}
	}
	return out, nil
}

// readIndex scans the index rows of the window, keys only, and reads the
// primary row of each row of a camera of states not seen yet.
func (t *tail) readIndex(ctx context.Context, states map[string]*cameraState, window captureRange) ([]found, []absent, error) {
	f := t.feed
	rows, err := f.indexRows(ctx, window, func(camera string) bool { return states[camera] != nil })
	if err != nil {
		return nil, nil, fmt.Errorf("watchfeed: scan the index: %w", err)
	}
	// Only passes write seen, one at a time: reading it here needs no lock.
	rows = slices.DeleteFunc(rows, func(row images.IndexRow) bool {
		_, ok := states[row.CameraID].seen[row.RowKey]
		return ok
	})
	read := make([]*images.Image, len(rows))
	err = inParallel(ctx, len(rows), func(ctx context.Context, i int) error {
		img, err := f.indexedImage(ctx, rows[i])
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		read[i] = &img
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("watchfeed: read indexed images: %w", err)
	}
	var out []found
	var missing []absent
	for i, row := range rows {
		if read[i] == nil {
			missing = append(missing, absent{state: states[row.CameraID], rowKey: row.RowKey})
			continue
		}
		out = append(out, found{state: states[row.CameraID], img: *read[i]})
	}
	return out, missing, nil
}

// apply feeds what a pass read that is new, under the feed's lock, and
// forgets what left the window.
func (t *tail) apply(imgs []found, missing []absent, window captureRange, now time.Time) {
	f := t.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	var fresh []images.Image
	for _, r := range imgs {
		if _, ok := r.state.seen[r.img.RowKey]; ok || t.cameras[r.img.CameraID] != r.state {
			continue
		}
		r.state.seen[r.img.RowKey] = r.img.CapturedAt
		delete(r.state.missing, r.img.RowKey)
		fresh = append(fresh, r.img)
	}
	giveUp := f.repo.IndexLag() + f.poll
	for _, m := range missing {
		first, ok := m.state.missing[m.rowKey]
		switch {
		case !ok:
			m.state.missing[m.rowKey] = now
		case now.Sub(first) > giveUp:
			// The create gave up: its primary row will never land.
			delete(m.state.missing, m.rowKey)
			at, err := store.TimeFromInvertedTicksRowKey(m.rowKey)
			if err != nil {
				at = now
			}
			m.state.seen[m.rowKey] = at
		}
	}
	slices.SortStableFunc(fresh, func(a, b images.Image) int {
		return cmp.Or(a.CapturedAt.Compare(b.CapturedAt), cmp.Compare(a.CameraID, b.CameraID))
	})
	f.publishLocked(fresh, now)
	for _, st := range t.cameras {
		maps.DeleteFunc(st.seen, func(_ string, at time.Time) bool { return at.Before(window.from) })
		maps.DeleteFunc(st.missing, func(_ string, first time.Time) bool { return now.Sub(first) > giveUp+f.window })
	}
}
