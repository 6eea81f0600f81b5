package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"
)

// kind is an image type; every camera captures one of each kind it is
// configured for every simulated minute.
type kind int

const (
	single kind = iota
	pano
	preStitch
)

var kindNames = map[kind]string{single: "single", pano: "pano", preStitch: "pre-stitch"}

func (k kind) String() string { return kindNames[k] }

func parseKinds(s string) ([]kind, error) {
	var kinds []kind
	for f := range strings.SplitSeq(s, ",") {
		name := strings.TrimSpace(f)
		found := false
		for k, n := range kindNames {
			if n == name {
				kinds, found = append(kinds, k), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-types: unknown image type %q (single, pano, pre-stitch)", name)
		}
	}
	return kinds, nil
}

// fleetConfig is the simulated fleet and the shape of its reads.
type fleetConfig struct {
	cameras      int
	prefix       string
	kinds        []kind
	batchSize    int
	listWindow   time.Duration
	listPageSize int
}

// fleet generates the fleet's images and read requests.
type fleet struct {
	fleetConfig
	ids   []string
	attrs []map[string]string
	// offset places this run's captures inside their minute, so two runs
	// against one server write different instants rather than colliding
	// (a different image at a camera's existing instant is ALREADY_EXISTS).
	offset time.Duration
	// oldest is the capture time of the oldest image this run wrote or
	// knows of; newest (unix nanoseconds) grows as the workload writes.
	oldest time.Time
	newest atomic.Int64
	// encoded are the attributes in wire form, per image type.
	encoded map[kind]*encodedAttrs
}

var (
	sites     = []string{"north-ridge", "harbour", "airport-east", "valley-dam", "city-hall", "coastline-7", "forest-watch", "bridge-12"}
	models    = []string{"AX-4K-PTZ", "AX-2K-FIX", "PanoLine 360", "SkyView S3"}
	firmwares = []string{"4.2.17", "4.3.2", "5.0.0-rc3", "4.2.19"}
)

func newFleet(c fleetConfig, rng *rand.Rand) *fleet {
	f := &fleet{fleetConfig: c, offset: time.Duration(rng.Int64N(int64(time.Minute/time.Microsecond))) * time.Microsecond}
	for i := range c.cameras {
		f.ids = append(f.ids, fmt.Sprintf("%s%06d", c.prefix, i))
		f.attrs = append(f.attrs, map[string]string{
			"site":     sites[i%len(sites)],
			"model":    models[i/len(sites)%len(models)],
			"firmware": firmwares[i%len(firmwares)],
			"mount":    []string{"pole", "roof", "wall"}[i%3],
			"timezone": []string{"Europe/Oslo", "America/Denver", "Australia/Perth"}[i%3],
		})
	}
	f.encodeFleetAttrs()
	return f
}

// at is the capture instant of the images of a minute.
func (f *fleet) at(minute time.Time) time.Time { return minute.Truncate(time.Minute).Add(f.offset) }

// noise is a deterministic pseudo-random number for one image, so a
// camera's image of a minute is the same whenever it is generated.
func noise(camera int, at time.Time, k kind) uint64 {
	z := uint64(camera)*0x9e3779b97f4a7c15 ^ uint64(at.UnixNano()) ^ uint64(k)<<56
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// camera picks a camera at random.
func (f *fleet) camera(rng *rand.Rand) int { return rng.IntN(f.cameras) }

// kind picks one of the fleet's image types at random.
func (f *fleet) kind(rng *rand.Rand) kind { return f.kinds[rng.IntN(len(f.kinds))] }

// batch picks batchSize distinct cameras: a run of consecutive ids from a
// random start, as a frontend showing one site's cameras asks.
func (f *fleet) batch(rng *rand.Rand) []string {
	n := min(f.batchSize, f.cameras)
	start := rng.IntN(f.cameras)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = f.ids[(start+i)%f.cameras]
	}
	return ids
}

// listRange picks a window of listWindow ending at a random instant of the
// history written so far.
func (f *fleet) listRange(rng *rand.Rand) (start, end time.Time) {
	newest := time.Unix(0, f.newest.Load())
	span := newest.Sub(f.oldest)
	end = newest.Add(time.Minute)
	if span > 0 {
		end = f.oldest.Add(time.Duration(rng.Int64N(int64(span)))).Add(time.Minute)
	}
	return end.Add(-f.listWindow), end
}

// wrote records that images captured at t exist.
func (f *fleet) wrote(t time.Time) {
	for {
		old := f.newest.Load()
		if t.UnixNano() <= old || f.newest.CompareAndSwap(old, t.UnixNano()) {
			return
		}
	}
}

// timeline hands out the fleet's images in capture order: every camera's
// images of one step, then the next step's. Workers share it.
type timeline struct {
	fleet *fleet
	start time.Time
	step  time.Duration
	// total bounds the images handed out; 0 is unbounded.
	total int64
	next  atomic.Int64
}

// image is one image to create.
type image struct {
	kind   kind
	camera int
	at     time.Time
}

// take returns the next image, or false when the timeline is done.
func (t *timeline) take() (image, bool) {
	i := t.next.Add(1) - 1
	if t.total > 0 && i >= t.total {
		return image{}, false
	}
	perStep := int64(t.fleet.cameras * len(t.fleet.kinds))
	step, rem := i/perStep, i%perStep
	return image{
		kind:   t.fleet.kinds[rem%int64(len(t.fleet.kinds))],
		camera: int(rem / int64(len(t.fleet.kinds))),
		at:     t.start.Add(time.Duration(step) * t.step),
	}, true
}
