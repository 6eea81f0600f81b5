package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// ErrNoDailyCounts refuses images per day on a backend that keeps no
// tallies (Azure).
var ErrNoDailyCounts = errors.New("fleet: this store keeps no images per day (only the embedded store tallies them)")

// Embedded is what the embedded store gives the views: *pebble.DB.
type Embedded interface {
	PartitionEnds(ctx context.Context, table, from string, visit func(partitionKey, firstRowKey, lastRowKey string) (bool, error)) error
	Tallies(ctx context.Context, table string, partitions store.Range, through time.Time, visit func(*store.DayTally) error) error
}

// Options configures Open.
type Options struct {
	// Repo is the image kind's repository; required.
	Repo *images.Repository
	// Embedded is the embedded store the repository's tables live in; nil
	// for Azure, where Cameras reads the camera table.
	Embedded Embedded
	// Cameras is the camera table the Recorder writes (Azure); required
	// when Embedded is nil (see OpenCameraTable).
	Cameras store.Table
	// Now tells the time silence is measured from; nil means time.Now.
	Now func() time.Time
}

// View answers the fleet's questions about one image kind.
type View struct {
	repo     *images.Repository
	primary  string
	embedded Embedded
	cameras  store.Table
	now      func() time.Time
}

// Open makes the view of opts.Repo's kind.
func Open(opts Options) (*View, error) {
	if opts.Repo == nil {
		return nil, errors.New("fleet: Options.Repo is required")
	}
	if opts.Embedded == nil && opts.Cameras == nil {
		return nil, errors.New("fleet: Options needs the embedded store or the camera table")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	primary, _ := opts.Repo.Tables()
	return &View{repo: opts.Repo, primary: primary.Name(), embedded: opts.Embedded, cameras: opts.Cameras, now: opts.Now}, nil
}

// Kind is the image kind the view reads.
func (v *View) Kind() images.Kind { return v.repo.Kind() }

// Camera is one camera of the inventory.
type Camera struct {
	ID string
	// First and Latest are the captures of its oldest and newest image.
	First, Latest time.Time
	// Days are its images per UTC day over the range asked for, oldest
	// first, days without images left out.
	Days []DayCount
}

// DayCount is a camera's images on one UTC day.
type DayCount struct {
	// Day is the UTC midnight starting the day.
	Day    time.Time
	Images int64
}

// CameraTableName is the name of the camera table of a primary table.
func CameraTableName(primary string) string { return primary + "Cameras" }

// OpenCameraTable opens (creating) the camera table of the kind's primary
// table on backend.
func OpenCameraTable(ctx context.Context, backend store.Backend, primary string) (store.Table, error) {
	t, err := backend.Table(ctx, CameraTableName(primary))
	if err != nil {
		return nil, fmt.Errorf("fleet: open %s: %w", CameraTableName(primary), err)
	}
	return t, nil
}

// cameraRowKey is the row key of a camera's row, its camera id being the
// partition key: the table's key order is camera order.
const cameraRowKey = "camera"

// The camera row's properties.
const (
	propFirst  = "FirstCapturedAt"
	propLatest = "LatestCapturedAt"
)

// endsOf reads a camera's first and latest capture from the row keys of
// its newest and oldest rows; ok is false for row keys that are not
// capture instants.
func endsOf(newestRowKey, oldestRowKey string) (first, latest time.Time, ok bool) {
	latest, err1 := store.TimeFromInvertedTicksRowKey(newestRowKey)
	first, err2 := store.TimeFromInvertedTicksRowKey(oldestRowKey)
	return first.UTC(), latest.UTC(), err1 == nil && err2 == nil
}
