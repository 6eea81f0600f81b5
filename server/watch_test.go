package server_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
)

// watchPatience bounds every wait for a Watch stream: far above what any
// step takes, even on a loaded machine; reaching it fails the test.
const watchPatience = 2 * time.Minute

// tailPoll is how often a tailing server looks at the index in these tests.
const tailPoll = 50 * time.Millisecond

// watchOpts feed the creates of the process on the embedded store and tail
// the index on Azure, as cmd/metadatad does.
func watchOpts(b backend) server.WatchOptions {
	if b.name == "azure" {
		return server.WatchOptions{Poll: tailPoll}
	}
	return server.WatchOptions{}
}

// watchStream is an open WatchSingleImageMetadata stream and what it received.
type watchStream struct {
	stream grpc.ServerStreamingClient[metadatav1.WatchSingleImageMetadataResponse]
	cancel context.CancelFunc
	got    []*metadatav1.WatchSingleImageMetadataResponse
}

func openWatch(t *testing.T, client metadatav1.SingleImageMetadataServiceClient, req *metadatav1.WatchSingleImageMetadataRequest) *watchStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), watchPatience)
	t.Cleanup(cancel)
	stream, err := client.WatchSingleImageMetadata(ctx, req)
	requireOK(t, err, "WatchSingleImageMetadata")
	return &watchStream{stream: stream, cancel: cancel}
}

// recv receives n responses.
func (w *watchStream) recv(t *testing.T, n int) []*metadatav1.WatchSingleImageMetadataResponse {
	t.Helper()
	start := len(w.got)
	for range n {
		resp, err := w.stream.Recv()
		requireOK(t, err, fmt.Sprintf("Watch receive after %d responses", len(w.got)))
		w.got = append(w.got, resp)
	}
	return w.got[start:]
}

// recvUntil receives until every image of want (camera@row key) arrived.
func (w *watchStream) recvUntil(t *testing.T, want []string) {
	t.Helper()
	missing := missingOf(w.got, want)
	for len(missing) > 0 {
		resp, err := w.stream.Recv()
		requireOK(t, err, fmt.Sprintf("Watch receive with %d images missing", len(missing)))
		w.got = append(w.got, resp)
		delete(missing, imageKey(resp.GetMetadata()))
	}
}

func imageKey(m *metadatav1.SingleImageMetadata) string { return m.GetCameraId() + "@" + m.GetRowKey() }

// requireOrderedPerCamera checks that each camera's images came in strictly
// ascending capture order.
func requireOrderedPerCamera(t *testing.T, got []*metadatav1.WatchSingleImageMetadataResponse) {
	t.Helper()
	last := map[string]time.Time{}
	for i, r := range got {
		m := r.GetMetadata()
		at := m.GetCapturedAt().AsTime()
		if prev, ok := last[m.GetCameraId()]; ok && !at.After(prev) {
			t.Fatalf("response %d: %s captured at %s after one at %s", i, m.GetCameraId(), at, prev)
		}
		last[m.GetCameraId()] = at
	}
}

func createSingle(t *testing.T, client metadatav1.SingleImageMetadataServiceClient, camera string, at time.Time) string {
	t.Helper()
	resp, err := client.CreateSingleImageMetadata(t.Context(), &metadatav1.CreateSingleImageMetadataRequest{
		Metadata: &metadatav1.SingleImageMetadata{CameraId: camera, CapturedAt: timestamppb.New(at), BlobUri: "blob://" + camera}})
	requireOK(t, err, "create "+camera)
	return imageKey(resp.GetMetadata())
}

// watchFrom opens a watch that has begun: start_with_latest sends each
// camera's seed image, created first, once the subscription stands.
func watchFrom(t *testing.T, client metadatav1.SingleImageMetadataServiceClient, cameras []string, at time.Time) *watchStream {
	t.Helper()
	for _, c := range cameras {
		createSingle(t, client, c, at)
	}
	w := openWatch(t, client, &metadatav1.WatchSingleImageMetadataRequest{CameraIds: cameras, StartWithLatest: true})
	for _, r := range w.recv(t, len(cameras)) {
		if !r.GetExisting() {
			t.Fatalf("first responses of start_with_latest: %v is not marked existing", r)
		}
	}
	return w
}

func TestWatchDeliversEachCameraInOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := startServerOpts(t, b.open(t), serverOpts{watch: watchOpts(b)})
		now := time.Now().UTC()
		cameras := []string{"cam-a", "cam-b", "cam-c"}
		w := watchFrom(t, h.single, cameras, now)
		var want []string
		for i := 1; i <= 10; i++ {
			for _, c := range cameras {
				want = append(want, createSingle(t, h.single, c, now.Add(time.Duration(i)*time.Millisecond)))
			}
			createSingle(t, h.single, "cam-unwatched", now.Add(time.Duration(i)*time.Millisecond))
		}
		w.recvUntil(t, want)
		requireOrderedPerCamera(t, w.got)
		for _, r := range w.got {
			if r.GetMetadata().GetCameraId() == "cam-unwatched" {
				t.Fatalf("received an image of a camera not watched: %v", r)
			}
			if r.GetResumeToken() == "" {
				t.Fatalf("response without a resume token: %v", r)
			}
		}
	})
}

func TestWatchStartWithLatestThenSkipsLateCaptures(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := startServerOpts(t, b.open(t), serverOpts{watch: watchOpts(b)})
		now := time.Now().UTC().Truncate(time.Millisecond)
		for i := range 3 {
			createSingle(t, h.single, "cam-a", now.Add(time.Duration(i)*time.Second))
		}
		createSingle(t, h.single, "cam-b", now)
		w := openWatch(t, h.single, &metadatav1.WatchSingleImageMetadataRequest{CameraIds: []string{"cam-a", "cam-b", "cam-none"}, StartWithLatest: true})
		latest := w.recv(t, 2)
		got := []string{}
		for _, r := range latest {
			if !r.GetExisting() {
				t.Fatalf("latest image not marked existing: %v", r)
			}
			got = append(got, r.GetMetadata().GetCameraId()+"@"+r.GetMetadata().GetCapturedAt().AsTime().Sub(now).String())
		}
		if want := []string{"cam-a@2s", "cam-b@0s"}; !slices.Equal(got, want) {
			t.Fatalf("start_with_latest sent %v, want %v", got, want)
		}
		createSingle(t, h.single, "cam-a", now.Add(time.Second/2)) // late: before cam-a's latest
		next := createSingle(t, h.single, "cam-b", now.Add(time.Second))
		if r := w.recv(t, 1)[0]; imageKey(r.GetMetadata()) != next || r.GetExisting() {
			t.Fatalf("after the latest images got %v, want the new %s (the late cam-a image skipped)", r, next)
		}
	})
}

func TestWatchResumeAfterDisconnectLosesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		h := startServerOpts(t, b.open(t), serverOpts{watch: watchOpts(b)})
		now := time.Now().UTC()
		cameras := []string{"cam-a", "cam-b"}
		first := watchFrom(t, h.single, cameras, now)
		var want []string
		for i := 1; i <= 10; i++ {
			for _, c := range cameras {
				want = append(want, createSingle(t, h.single, c, now.Add(time.Duration(i)*time.Millisecond)))
			}
		}
		before := first.recv(t, 5)
		first.cancel()
		for i := 11; i <= 20; i++ {
			for _, c := range cameras {
				want = append(want, createSingle(t, h.single, c, now.Add(time.Duration(i)*time.Millisecond)))
			}
		}
		resumed := openWatch(t, h.single, &metadatav1.WatchSingleImageMetadataRequest{CameraIds: cameras, ResumeToken: before[len(before)-1].GetResumeToken()})
		// What the first watch received counts as delivered: the resumed one
		// must bring the rest, in order, possibly with some again.
		resumed.got = append(resumed.got, first.got...)
		resumed.recvUntil(t, want)
		requireOrderedPerCamera(t, resumed.got[len(first.got):])
	})
}

// TestWatchEndsASlowConsumerWithAResumePoint: a client that reads nothing
// while thousands of images are created is ended with RESOURCE_EXHAUSTED and
// the token of the last response sent; watching again from it brings the
// rest. On Azure the images reach the stream through the tail, a pass's new
// images at once.
func TestWatchEndsASlowConsumerWithAResumePoint(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachBackend(t, func(t *testing.T, b backend) {
		opts := watchOpts(b)
		opts.Buffer = 8
		if opts.Poll > 0 {
			// Each pass reads the thousands of rows the watched cameras
			// have in the window: a slower tail leaves Azurite to the
			// creates.
			opts.Poll = 10 * tailPoll
		}
		h := startServerOpts(t, b.open(t), serverOpts{watch: opts})
		// A fixed flow-control window: the server can send only so much before
		// the client reads.
		conn, err := grpc.NewClient("passthrough:///bufconn",
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return h.lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
		requireOK(t, err, "dial")
		t.Cleanup(func() { _ = conn.Close() })
		client := metadatav1.NewSingleImageMetadataServiceClient(conn)
		now := time.Now().UTC()
		cameras := []string{"cam-a", "cam-b", "cam-c", "cam-d"}
		slow := watchFrom(t, client, cameras, now)
		// Far more than the window and the buffer hold, created while the
		// client reads nothing.
		const perCamera = 600
		var mu sync.Mutex
		var want []string
		var wg sync.WaitGroup
		for _, c := range cameras {
			wg.Go(func() {
				for i := 1; i <= perCamera; i++ {
					k := createSingle(t, h.single, c, now.Add(time.Duration(i)*time.Millisecond))
					mu.Lock()
					want = append(want, k)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		st := slow.recvToEnd(t)
		requireCode(t, st.Err(), codes.ResourceExhausted)
		if !strings.Contains(st.Message(), "fell behind") {
			t.Errorf("message %q does not say the stream fell behind", st.Message())
		}
		token := resumeTokenOf(t, st)
		requireResumePoint(t, token, slow.got[len(slow.got)-1].GetResumeToken())
		if len(slow.got) >= len(want)+len(cameras) {
			t.Fatalf("the slow stream got all %d images yet was ended", len(slow.got))
		}
		resumeUntil(t, client, cameras, token, slow.got, want)
		t.Logf("slow stream ended after %d of %d images", len(slow.got)-len(cameras), len(want))
	})
}

// recvToEnd receives until the stream fails, and returns its status.
func (w *watchStream) recvToEnd(t *testing.T) *status.Status {
	t.Helper()
	for {
		resp, err := w.stream.Recv()
		if err != nil {
			st, ok := status.FromError(err)
			if !ok {
				t.Fatalf("Watch ended with %v, not a gRPC status", err)
			}
			return st
		}
		w.got = append(w.got, resp)
	}
}

// resumeUntil watches cameras from token until every image of want arrived,
// those of delivered counting as received, as a client does: a stream the
// server ends as fallen behind is watched again from its resume point, for a
// tail pass may hand a stream more new images at once than its buffer
// holds. Each watch's own responses must keep each camera's order. It
// returns delivered and all the watches received.
func resumeUntil(t *testing.T, client metadatav1.SingleImageMetadataServiceClient, cameras []string, token string,
	delivered []*metadatav1.WatchSingleImageMetadataResponse, want []string) []*metadatav1.WatchSingleImageMetadataResponse {
	t.Helper()
	got := slices.Clone(delivered)
	missing := missingOf(got, want)
	for watches := 1; ; watches++ {
		w := openWatch(t, client, &metadatav1.WatchSingleImageMetadataRequest{CameraIds: cameras, ResumeToken: token})
		start := len(got)
		var err error
		for len(missing) > 0 && err == nil {
			var resp *metadatav1.WatchSingleImageMetadataResponse
			if resp, err = w.stream.Recv(); err == nil {
				got = append(got, resp)
				delete(missing, imageKey(resp.GetMetadata()))
			}
		}
		w.cancel()
		requireOrderedPerCamera(t, got[start:])
		if err == nil {
			return got
		}
		st := requireCode(t, err, codes.ResourceExhausted)
		if watches == 20 {
			t.Fatalf("20 watches fell behind; %d images still missing", len(missing))
		}
		token = resumeTokenOf(t, st)
	}
}

// missingOf is the images of want (camera@row key) that got lacks.
func missingOf(got []*metadatav1.WatchSingleImageMetadataResponse, want []string) map[string]bool {
	missing := make(map[string]bool, len(want))
	for _, k := range want {
		missing[k] = true
	}
	for _, r := range got {
		delete(missing, imageKey(r.GetMetadata()))
	}
	return missing
}

// requireResumePoint fails unless the resume point of an ended stream is
// the last response's token or later: an image the stream passed over (its
// camera already had a newer one sent, as when a tail feeds an image that
// start_with_latest sent) moves the point on without a response. Whether
// it misses nothing, the watch from it shows.
func requireResumePoint(t *testing.T, token, last string) {
	t.Helper()
	at, ok := decodeToken(token)
	lastAt, lastOK := decodeToken(last)
	if !ok || !lastOK || at.Before(lastAt) {
		t.Fatalf("resume point %q (%s) is before the last response's token %q (%s)", token, at, last, lastAt)
	}
}

// decodeToken reads the Stamp of a resume token made as encodeToken does.
func decodeToken(token string) (time.Time, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return time.Time{}, false
	}
	nanos, err := strconv.ParseInt(strings.TrimPrefix(string(raw), "w1:"), 10, 64)
	return time.Unix(0, nanos), err == nil && strings.HasPrefix(string(raw), "w1:")
}

// resumeTokenOf is the resume point of a Watch the server ended.
func resumeTokenOf(t *testing.T, st *status.Status) string {
	t.Helper()
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "WATCH_ENDED" {
			if token := info.GetMetadata()["resume_token"]; token != "" {
				return token
			}
		}
	}
	t.Fatalf("status %v carries no WATCH_ENDED ErrorInfo with a resume_token", st)
	return ""
}

func TestWatchEndsAtShutdown(t *testing.T) {
	h := startServerOpts(t, openMemPebble(t), serverOpts{})
	w := watchFrom(t, h.single, []string{"cam-a"}, time.Now().UTC())
	// A minute of grace: a watch that held the shutdown would be cut off at
	// its end, without the resume point.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shutdownReturns(t, h, ctx, watchPatience); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	_, err := w.stream.Recv()
	st := requireCode(t, err, codes.Unavailable)
	if token := resumeTokenOf(t, st); token != w.got[0].GetResumeToken() {
		t.Fatalf("resume point %q, want the last response's %q", token, w.got[0].GetResumeToken())
	}
}

func TestWatchEndsWhenTheClientCancels(t *testing.T) {
	h := startServerOpts(t, openMemPebble(t), serverOpts{watch: server.WatchOptions{Buffer: 1}})
	now := time.Now().UTC()
	w := watchFrom(t, h.single, []string{"cam-a"}, now)
	w.cancel()
	requireCode(t, func() error { _, err := w.stream.Recv(); return err }(), codes.Canceled)
	// Creates go on, and the server's shutdown is not held by the watch.
	for i := 1; i <= 20; i++ {
		createSingle(t, h.single, "cam-a", now.Add(time.Duration(i)*time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shutdownReturns(t, h, ctx, watchPatience); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestWatchRefusesBadRequests(t *testing.T) {
	h := startServerOpts(t, openMemPebble(t), serverOpts{})
	tooMany := make([]string, 1001)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("cam-%d", i)
	}
	old := time.Now().Add(-2 * time.Hour).UnixNano()
	for _, tc := range []struct {
		name  string
		req   *metadatav1.WatchSingleImageMetadataRequest
		field string
	}{
		{"no cameras", &metadatav1.WatchSingleImageMetadataRequest{}, "camera_ids"},
		{"too many cameras", &metadatav1.WatchSingleImageMetadataRequest{CameraIds: tooMany}, "camera_ids"},
		{"bad camera id", &metadatav1.WatchSingleImageMetadataRequest{CameraIds: []string{"cam-a", "a/b"}}, "camera_ids[1]"},
		{"malformed token", &metadatav1.WatchSingleImageMetadataRequest{CameraIds: []string{"cam-a"}, ResumeToken: "x"}, "resume_token"},
		{"old token", &metadatav1.WatchSingleImageMetadataRequest{CameraIds: []string{"cam-a"},
			ResumeToken: encodeToken(old)}, "resume_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := openWatch(t, h.single, tc.req)
			_, err := w.stream.Recv()
			requireFieldViolation(t, err, tc.field)
		})
	}
}

// TestWatchRefusesATokenOlderThanTheConfiguredAge: a server configured
// with a shorter resume age refuses an older token, and resumes a younger
// one.
func TestWatchRefusesATokenOlderThanTheConfiguredAge(t *testing.T) {
	h := startServerOpts(t, openMemPebble(t), serverOpts{watch: server.WatchOptions{MaxResumeAge: 10 * time.Minute}})
	now := time.Now().UTC()
	old := openWatch(t, h.single, &metadatav1.WatchSingleImageMetadataRequest{CameraIds: []string{"cam-a"},
		ResumeToken: encodeToken(now.Add(-20 * time.Minute).UnixNano())})
	_, err := old.stream.Recv()
	requireFieldViolation(t, err, "resume_token")
	want := createSingle(t, h.single, "cam-a", now.Add(-time.Minute))
	young := openWatch(t, h.single, &metadatav1.WatchSingleImageMetadataRequest{CameraIds: []string{"cam-a"},
		ResumeToken: encodeToken(now.Add(-5 * time.Minute).UnixNano())})
	young.recvUntil(t, []string{want})
}

// encodeToken makes a resume token as the server does, for a Stamp.
func encodeToken(unixNanos int64) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "w1:%d", unixNanos))
}

// sharedAzure returns a function that opens, at each call, a new client of
// one set of tables on Azurite, as replicas share one storage account.
func sharedAzure(t *testing.T) func() store.Backend {
	t.Helper()
	var id [5]byte
	_, _ = rand.Read(id[:])
	prefix := "t" + hex.EncodeToString(id[:])
	return func() store.Backend {
		b, err := aztable.Open(t.Context(), aztable.Options{ConnectionString: azurite.Require(t), TablePrefix: prefix,
			Logger: slog.New(slog.DiscardHandler)})
		requireOK(t, err, "open Azure tables")
		return b
	}
}

// TestWatchSeesCreatesOfAnotherReplica runs two servers on one Azurite
// account: a create on one reaches a watch on the other, through the tail
// of the index.
func TestWatchSeesCreatesOfAnotherReplica(t *testing.T) {
	open := sharedAzure(t)
	opts := serverOpts{watch: server.WatchOptions{Poll: tailPoll}}
	writer, watcher := startServerOpts(t, open(), opts), startServerOpts(t, open(), opts)
	now := time.Now().UTC()
	createSingle(t, writer.single, "cam-a", now)
	w := openWatch(t, watcher.single, &metadatav1.WatchSingleImageMetadataRequest{CameraIds: []string{"cam-a"}, StartWithLatest: true})
	w.recv(t, 1)
	var want []string
	for i := 1; i <= 5; i++ {
		want = append(want, createSingle(t, writer.single, "cam-a", now.Add(time.Duration(i)*time.Millisecond)))
	}
	w.recvUntil(t, want)
	requireOrderedPerCamera(t, w.got)
}

// TestWatchResumesOnAnotherReplica: a replica shuts down under a watch of
// the images created on both replicas; the client watches again on the
// other replica with the resume point the shutdown gave, and gets every
// image created before and after, none lost, each camera in order.
func TestWatchResumesOnAnotherReplica(t *testing.T) {
	open := sharedAzure(t)
	opts := serverOpts{watch: server.WatchOptions{Poll: tailPoll}}
	first, second := startServerOpts(t, open(), opts), startServerOpts(t, open(), opts)
	now := time.Now().UTC()
	cameras := []string{"cam-a", "cam-b"}
	w := watchFrom(t, first.single, cameras, now)
	var want []string
	at := func(i int) time.Time { return now.Add(time.Duration(i) * time.Millisecond) }
	for i := 1; i <= 10; i++ {
		replica := []*harness{first, second}[i%2]
		for _, c := range cameras {
			want = append(want, createSingle(t, replica.single, c, at(i)))
		}
	}
	w.recv(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shutdownReturns(t, first, ctx, watchPatience); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	st := w.recvToEnd(t)
	requireCode(t, st.Err(), codes.Unavailable)
	token := resumeTokenOf(t, st)
	requireResumePoint(t, token, w.got[len(w.got)-1].GetResumeToken())
	requireOrderedPerCamera(t, w.got)
	for i := 11; i <= 20; i++ {
		for _, c := range cameras {
			want = append(want, createSingle(t, second.single, c, at(i)))
		}
	}
	got := resumeUntil(t, second.single, cameras, token, w.got, want)
	t.Logf("the first replica sent %d images before it stopped, the second %d more", len(w.got)-len(cameras), len(got)-len(w.got))
}

// TestWatchServesPanoAndPreStitch watches the two other kinds, each with the
// field only it carries: one generic path serves all three.
func TestWatchServesPanoAndPreStitch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		testWatchPanoAndPreStitch(t, startServerOpts(t, b.open(t), serverOpts{watch: watchOpts(b)}))
	})
}

func testWatchPanoAndPreStitch(t *testing.T, h *harness) {
	ctx, cancel := context.WithTimeout(t.Context(), watchPatience)
	defer cancel()
	now := time.Now().UTC().Truncate(time.Millisecond)
	createPano := func(at time.Time) {
		_, err := h.pano.CreatePanoImageMetadata(t.Context(), &metadatav1.CreatePanoImageMetadataRequest{
			Metadata: &metadatav1.PanoImageMetadata{CameraId: "cam-a", CapturedAt: timestamppb.New(at), IsClearDay: true}})
		requireOK(t, err, "create pano")
	}
	createPreStitch := func(at time.Time) {
		_, err := h.preStitch.CreatePreStitchImageMetadata(t.Context(), &metadatav1.CreatePreStitchImageMetadataRequest{
			Metadata: &metadatav1.PreStitchImageMetadata{CameraId: "cam-a", CapturedAt: timestamppb.New(at), PanoImageCorrelationId: "pano-1"}})
		requireOK(t, err, "create pre-stitch")
	}
	createPano(now)
	createPreStitch(now)
	pano, err := h.pano.WatchPanoImageMetadata(ctx, &metadatav1.WatchPanoImageMetadataRequest{CameraIds: []string{"cam-a"}, StartWithLatest: true})
	requireOK(t, err, "WatchPanoImageMetadata")
	preStitch, err := h.preStitch.WatchPreStitchImageMetadata(ctx, &metadatav1.WatchPreStitchImageMetadataRequest{CameraIds: []string{"cam-a"}, StartWithLatest: true})
	requireOK(t, err, "WatchPreStitchImageMetadata")
	for _, recv := range []func() (bool, error){
		func() (bool, error) { r, err := pano.Recv(); return r.GetExisting(), err },
		func() (bool, error) { r, err := preStitch.Recv(); return r.GetExisting(), err },
	} {
		if existing, err := recv(); err != nil || !existing {
			t.Fatalf("start_with_latest: existing %v, %v", existing, err)
		}
	}
	later := now.Add(time.Millisecond)
	createPano(later)
	createPreStitch(later)
	p, err := pano.Recv()
	requireOK(t, err, "pano receive")
	if !p.GetMetadata().GetIsClearDay() || !p.GetMetadata().GetCapturedAt().AsTime().Equal(later) || p.GetResumeToken() == "" {
		t.Fatalf("pano watch sent %v", p)
	}
	ps, err := preStitch.Recv()
	requireOK(t, err, "pre-stitch receive")
	if ps.GetMetadata().GetPanoImageCorrelationId() != "pano-1" || !ps.GetMetadata().GetCapturedAt().AsTime().Equal(later) {
		t.Fatalf("pre-stitch watch sent %v", ps)
	}
}
