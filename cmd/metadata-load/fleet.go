package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
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

// Every image's two varying attributes take one of these values, so an
// image's attributes are built without formatting a number.
var (
	exposures = func() (out [30]string) {
		for i := range out {
			out[i] = strconv.Itoa(2 + i)
		}
		return out
	}()
	isos = [4]string{"100", "200", "400", "800"}
)

// creator writes the fleet's images for one worker, into request messages
// it reuses from call to call: a fresh request with its attributes map
// was most of what a create allocated in the tool, and the tool shares its
// machine with the server it measures. A unary call has encoded its
// request by the time it returns, so the next call may overwrite it.
type creator struct {
	fleet     *fleet
	single    metadatav1.CreateSingleImageMetadataRequest
	pano      metadatav1.CreatePanoImageMetadataRequest
	preStitch metadatav1.CreatePreStitchImageMetadataRequest
	attrs     map[string]string
	captured  timestamppb.Timestamp
	buf       []byte
	// reply takes every create's response undecoded: the tool reads
	// nothing of it, and decoding the stored image was a tenth of the
	// tool's CPU per create, none of it the server's.
	reply emptypb.Empty
}

func (f *fleet) creator() *creator {
	c := &creator{fleet: f, attrs: map[string]string{}}
	c.single.Metadata = &metadatav1.SingleImageMetadata{ContentType: "image/jpeg", Width: 1920, Height: 1080}
	c.pano.Metadata = &metadatav1.PanoImageMetadata{ContentType: "image/jpeg", Width: 8192, Height: 2048}
	c.preStitch.Metadata = &metadatav1.PreStitchImageMetadata{ContentType: "image/jpeg", Width: 4056, Height: 3040}
	return c
}

// create writes the image of kind k that camera captured at.
func (c *creator) create(ctx context.Context, cl *clients, k kind, camera int, at time.Time) error {
	f := c.fleet
	id := f.ids[camera]
	n := noise(camera, at, k)
	clear(c.attrs)
	maps.Copy(c.attrs, f.attrs[camera])
	c.attrs["exposure_ms"] = exposures[n%30]
	c.attrs["iso"] = isos[n>>8%4]
	c.captured.Seconds, c.captured.Nanos = at.Unix(), int32(at.Nanosecond())
	switch k {
	case single:
		m := c.single.Metadata
		m.CameraId, m.CapturedAt, m.Attributes = id, &c.captured, c.attrs
		m.BlobUri = c.blobURI(id, "/", at, ".jpg")
		m.SizeBytes = 150_000 + int64(n%250_000)
		return cl.conn.Invoke(ctx, metadatav1.SingleImageMetadataService_CreateSingleImageMetadata_FullMethodName, &c.single, &c.reply)
	case pano:
		m := c.pano.Metadata
		m.CameraId, m.CapturedAt, m.Attributes = id, &c.captured, c.attrs
		m.BlobUri = c.blobURI(id, "/pano/", at, ".jpg")
		m.SizeBytes = 2_000_000 + int64(n%1_500_000)
		m.IsClearDay = n%10 < 3
		return cl.conn.Invoke(ctx, metadatav1.PanoImageMetadataService_CreatePanoImageMetadata_FullMethodName, &c.pano, &c.reply)
	case preStitch:
		m := c.preStitch.Metadata
		m.CameraId, m.CapturedAt, m.Attributes = id, &c.captured, c.attrs
		m.BlobUri = c.blobURI(id, "/raw/", at, "-0.jpg")
		m.SizeBytes = 3_000_000 + int64(n%800_000)
		c.buf = append(append(append(c.buf[:0], "pano-"...), id...), '-')
		c.buf = at.UTC().AppendFormat(c.buf, "200601021504")
		m.PanoImageCorrelationId = string(c.buf)
		return cl.conn.Invoke(ctx, metadatav1.PreStitchImageMetadataService_CreatePreStitchImageMetadata_FullMethodName, &c.preStitch, &c.reply)
	}
	return fmt.Errorf("unknown image type %d", k)
}

// blobURI is where the image's blob would be: the camera's directory, the
// kind's part, the capture minute and the suffix.
func (c *creator) blobURI(id, part string, at time.Time, suffix string) string {
	c.buf = append(append(append(c.buf[:0], "https://images.example.net/"...), id...), part...)
	c.buf = append(at.UTC().AppendFormat(c.buf, "2006/01/02/1504"), suffix...)
	return string(c.buf)
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
