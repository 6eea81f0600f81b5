package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/images"
)

var killCycles = flag.Int("kill-cycles", 20, "kill -9 cycles of TestAcknowledgedCreatesSurviveKill9 (more for a longer proof)")

// crashWriters write concurrently while the daemon is killed, each to its
// own cameras, so every acknowledged create can be looked for afterwards.
const (
	crashWriters          = 8
	crashCamerasPerWriter = 4
)

var crashBase = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// imageClients are the three image services on one connection.
type imageClients struct {
	single    metadatav1.SingleImageMetadataServiceClient
	pano      metadatav1.PanoImageMetadataServiceClient
	preStitch metadatav1.PreStitchImageMetadataServiceClient
}

func newImageClients(conn *grpc.ClientConn) imageClients {
	return imageClients{
		single:    metadatav1.NewSingleImageMetadataServiceClient(conn),
		pano:      metadatav1.NewPanoImageMetadataServiceClient(conn),
		preStitch: metadatav1.NewPreStitchImageMetadataServiceClient(conn),
	}
}

// written is one image a writer created.
type written struct {
	kind   images.Kind
	camera string
	at     time.Time
}

// create writes the image w names, of its kind.
func (c imageClients) create(ctx context.Context, w written) error {
	var err error
	switch w.kind {
	case images.Single:
		_, err = c.single.CreateSingleImageMetadata(ctx, &metadatav1.CreateSingleImageMetadataRequest{Metadata: w.single()})
	case images.Pano:
		_, err = c.pano.CreatePanoImageMetadata(ctx, &metadatav1.CreatePanoImageMetadataRequest{Metadata: w.pano()})
	case images.PreStitch:
		_, err = c.preStitch.CreatePreStitchImageMetadata(ctx, &metadatav1.CreatePreStitchImageMetadataRequest{Metadata: w.preStitch()})
	}
	return err
}

// seed writes imgs, all of one kind, in BatchCreate calls, each image as
// create would write it, and fails unless every one is acknowledged: a
// fixture's rows in a few calls rather than one call each.
func (c imageClients) seed(ctx context.Context, kind images.Kind, imgs []written) error {
	for chunk := range slices.Chunk(imgs, images.MaxBatchCreate) {
		var statuses []int32
		switch kind {
		case images.Single:
			req := &metadatav1.BatchCreateSingleImageMetadataRequest{}
			for _, w := range chunk {
				req.Metadata = append(req.Metadata, w.single())
			}
			resp, err := c.single.BatchCreateSingleImageMetadata(ctx, req)
			if err != nil {
				return err
			}
			for _, r := range resp.GetResults() {
				statuses = append(statuses, r.GetStatus().GetCode())
			}
		case images.Pano:
			req := &metadatav1.BatchCreatePanoImageMetadataRequest{}
			for _, w := range chunk {
				req.Metadata = append(req.Metadata, w.pano())
			}
			resp, err := c.pano.BatchCreatePanoImageMetadata(ctx, req)
			if err != nil {
				return err
			}
			for _, r := range resp.GetResults() {
				statuses = append(statuses, r.GetStatus().GetCode())
			}
		case images.PreStitch:
			req := &metadatav1.BatchCreatePreStitchImageMetadataRequest{}
			for _, w := range chunk {
				req.Metadata = append(req.Metadata, w.preStitch())
			}
			resp, err := c.preStitch.BatchCreatePreStitchImageMetadata(ctx, req)
			if err != nil {
				return err
			}
			for _, r := range resp.GetResults() {
				statuses = append(statuses, r.GetStatus().GetCode())
			}
		}
		if len(statuses) != len(chunk) {
			return fmt.Errorf("a batch of %d %s images got %d results", len(chunk), kind, len(statuses))
		}
		for i, code := range statuses {
			if code != 0 {
				return fmt.Errorf("%s image of %s at %v: status %d", kind, chunk[i].camera, chunk[i].at, code)
			}
		}
	}
	return nil
}

// blobURI is the blob an image create writes names.
func (w written) blobURI() string {
	return fmt.Sprintf("https://blobs.example/%s/%d.jpg", w.camera, w.at.Unix())
}

var crashAttributes = map[string]string{"site": "crash"}

func (w written) single() *metadatav1.SingleImageMetadata {
	return &metadatav1.SingleImageMetadata{CameraId: w.camera, CapturedAt: timestamppb.New(w.at), BlobUri: w.blobURI(), SizeBytes: 200_000, Attributes: crashAttributes}
}

func (w written) pano() *metadatav1.PanoImageMetadata {
	return &metadatav1.PanoImageMetadata{CameraId: w.camera, CapturedAt: timestamppb.New(w.at), BlobUri: w.blobURI(), SizeBytes: 3_000_000,
		IsClearDay: w.at.Unix()%2 == 0, Attributes: crashAttributes}
}

func (w written) preStitch() *metadatav1.PreStitchImageMetadata {
	return &metadatav1.PreStitchImageMetadata{CameraId: w.camera, CapturedAt: timestamppb.New(w.at), BlobUri: w.blobURI(), SizeBytes: 3_500_000,
		PanoImageCorrelationId: "pano-" + w.blobURI(), Attributes: crashAttributes}
}

// captured lists the capture times of every image of a camera and kind, newest first.
func (c imageClients) captured(t *testing.T, kind images.Kind, camera string) []time.Time {
	t.Helper()
	var out []time.Time
	token := ""
	for {
		var got []interface{ GetCapturedAt() *timestamppb.Timestamp }
		var next string
		var err error
		switch kind {
		case images.Single:
			var r *metadatav1.ListSingleImageMetadataResponse
			r, err = c.single.ListSingleImageMetadata(t.Context(), &metadatav1.ListSingleImageMetadataRequest{CameraId: camera, PageSize: 1000, PageToken: token})
			for _, m := range r.GetMetadata() {
				got = append(got, m)
			}
			next = r.GetNextPageToken()
		case images.Pano:
			var r *metadatav1.ListPanoImageMetadataResponse
			r, err = c.pano.ListPanoImageMetadata(t.Context(), &metadatav1.ListPanoImageMetadataRequest{CameraId: camera, PageSize: 1000, PageToken: token})
			for _, m := range r.GetMetadata() {
				got = append(got, m)
			}
			next = r.GetNextPageToken()
		case images.PreStitch:
			var r *metadatav1.ListPreStitchImageMetadataResponse
			r, err = c.preStitch.ListPreStitchImageMetadata(t.Context(), &metadatav1.ListPreStitchImageMetadataRequest{CameraId: camera, PageSize: 1000, PageToken: token})
			for _, m := range r.GetMetadata() {
				got = append(got, m)
			}
			next = r.GetNextPageToken()
		}
		if err != nil {
			t.Fatalf("list %s of %s: %v", kind, camera, err)
		}
		for _, m := range got {
			out = append(out, m.GetCapturedAt().AsTime())
		}
		if next == "" {
			return out
		}
		token = next
	}
}

// TestAcknowledgedCreatesSurviveKill9 kills the daemon without warning,
// -kill-cycles times, while 8 writers create images of all three types;
// every create it acknowledged is readable after the restarts, and the
// primary and index tables of each type hold exactly the same images
// (on Azure, every primary row has its index row). On Azurite it runs a
// quarter of the cycles.
func TestAcknowledgedCreatesSurviveKill9(t *testing.T) {
	for _, s := range crashStores(t) {
		t.Run(s.name, func(t *testing.T) { acknowledgedCreatesSurviveKill9(t, s) })
	}
}

// killWhileWriting starts the daemon cycles times and kills it with
// SIGKILL while writers call write back to back: once every writer has had
// a write acknowledged in the cycle, then at a random point up to within
// later. write reports false once the daemon is gone (that write's outcome
// unknown); acknowledged says what has been acknowledged so far, for the
// log.
func killWhileWriting(t *testing.T, s crashStore, cycles, writers int, within time.Duration,
	write func(ctx context.Context, clients imageClients, w int) bool, acknowledged func() string) {
	t.Helper()
	for cycle := range cycles {
		d := s.start(t)
		clients := newImageClients(d.conn(t))
		ctx, cancel := context.WithCancel(t.Context())
		var wg, first sync.WaitGroup
		first.Add(writers)
		for w := range writers {
			wg.Go(func() {
				firstDone := false
				defer func() {
					if !firstDone {
						first.Done()
					}
				}()
				for ctx.Err() == nil && write(ctx, clients, w) {
					if !firstDone {
						firstDone = true
						first.Done()
					}
				}
			})
		}
		first.Wait()
		time.Sleep(rand.N(within))
		if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = d.cmd.Wait()
		cancel()
		wg.Wait()
		t.Logf("cycle %d: killed with %s acknowledged so far", cycle, acknowledged())
	}
}

func acknowledgedCreatesSurviveKill9(t *testing.T, s crashStore) {
	cycles := s.cycles(*killCycles)
	acked := make([][]written, crashWriters)
	next := make([]int, crashWriters)
	killWhileWriting(t, s, cycles, crashWriters, 200*time.Millisecond, func(ctx context.Context, clients imageClients, w int) bool {
		seq := next[w]
		next[w]++
		img := written{
			kind:   images.Kinds[seq%len(images.Kinds)],
			camera: fmt.Sprintf("crash-w%d-c%d", w, seq/len(images.Kinds)%crashCamerasPerWriter),
			at:     crashBase.Add(time.Duration(seq) * time.Second),
		}
		if err := clients.create(ctx, img); err != nil {
			return false // the daemon is gone; this create's outcome is unknown
		}
		acked[w] = append(acked[w], img)
		return true
	}, func() string { return fmt.Sprintf("%d creates", countAcked(acked)) })

	d := s.start(t)
	clients := newImageClients(d.conn(t))
	for w := range crashWriters {
		byPartition := map[string][]time.Time{}
		for _, img := range acked[w] {
			key := img.kind.String() + "/" + img.camera
			byPartition[key] = append(byPartition[key], img.at)
		}
		for key, want := range byPartition {
			kindName, camera, _ := strings.Cut(key, "/")
			got := clients.captured(t, kindByName(t, kindName), camera)
			for _, at := range want {
				if !slices.ContainsFunc(got, at.Equal) {
					t.Fatalf("acknowledged %s image of %s at %v lost after %d kill -9 cycles", kindName, camera, at, cycles)
				}
			}
		}
	}
	stop(t, d)
	s.requireIndexMatchesPrimary(t, time.Time{})
}

func countAcked(acked [][]written) int {
	n := 0
	for _, a := range acked {
		n += len(a)
	}
	return n
}

func kindByName(t *testing.T, name string) images.Kind {
	t.Helper()
	for _, k := range images.Kinds {
		if k.String() == name {
			return k
		}
	}
	t.Fatalf("no image kind %q", name)
	return 0
}

// requireIndexMatchesPrimary checks the rows a stopped daemon left in its
// embedded store (see crashStore.requireIndexMatchesPrimary).
func requireIndexMatchesPrimary(t *testing.T, dataDir string, notBefore time.Time) {
	t.Helper()
	embeddedStore(dataDir).requireIndexMatchesPrimary(t, notBefore)
}
