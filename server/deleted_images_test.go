package server_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/testwait"
	"github.com/metadatad/metadatad/server"
	"github.com/metadatad/metadatad/store/retention"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// purgeSingles creates four single images of cam-0 and purges them with a
// policy, so that the outbox names them and no image of another type.
func purgeSingles(t *testing.T, h *harness) {
	t.Helper()
	ctx := t.Context()
	for m := range 4 {
		_, err := h.single.CreateSingleImageMetadata(ctx, &metadatav1.CreateSingleImageMetadataRequest{
			Metadata: &metadatav1.SingleImageMetadata{CameraId: "cam-0", CapturedAt: timestamp(minute(m))}})
		requireOK(t, err, "create single")
	}
	time.Sleep(h.indexLag) // see seedMinutes
	_, err := h.retention.CreateRetentionPolicy(ctx, &metadatav1.CreateRetentionPolicyRequest{RetentionPolicy: &metadatav1.RetentionPolicy{
		Name: "retentionPolicies/default", SingleRetentionDays: 1}})
	requireOK(t, err, "create policy")
	start, err := h.retention.StartPurge(ctx, &metadatav1.StartPurgeRequest{UsePolicies: true})
	requireOK(t, err, "StartPurge")
	watch(t, h, start.GetJob().GetJobId())
}

// TestAFilteredWatchOfDeletedImagesMovesItsToken: a pano-only stream that
// meets only single-image deletions gets a message without images whose
// token is past them, so that once they are retired it resumes from there
// rather than into OUT_OF_RANGE, having missed nothing. On both backends.
func TestAFilteredWatchOfDeletedImagesMovesItsToken(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachBackend(t, func(t *testing.T, b backend) {
		now := minute(0).Add(policy.Days(2))
		tables := b.open(t)
		h := startServerOpts(t, tables, serverOpts{runPurges: true, outbox: true, now: func() time.Time { return now }})
		purgeSingles(t, h)
		panos := []metadatav1.ImageType{metadatav1.ImageType_IMAGE_TYPE_PANO}

		ctx, cancel := context.WithTimeout(t.Context(), watchPatience)
		defer cancel()
		stream, err := h.retention.WatchDeletedImages(ctx, &metadatav1.WatchDeletedImagesRequest{ImageTypes: panos})
		requireOK(t, err, "WatchDeletedImages")
		resp, err := stream.Recv()
		requireOK(t, err, "receive the position past the singles")
		if len(resp.GetImages()) != 0 || resp.GetResumeToken() == "" {
			t.Fatalf("a pano-only stream after single deletions got %v, want a position and no image", resp)
		}
		token := resp.GetResumeToken()
		cancel()

		// A server a month on retires the purge's outbox as it starts; the
		// position past it resumes without error.
		later := now.Add(retention.DefaultJobRetention + policy.Days(1))
		next := startServerOpts(t, tables, serverOpts{runPurges: true, outbox: true, now: func() time.Time { return later }})
		first := map[string]string{"pebble": "1", "azure": "1."}[b.name]
		testwait.Until(t, watchPatience, func() error {
			rctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			old, err := next.retention.WatchDeletedImages(rctx, &metadatav1.WatchDeletedImagesRequest{ResumeToken: first})
			if err == nil {
				_, err = old.Recv()
			}
			if status.Code(err) != codes.OutOfRange {
				return fmt.Errorf("the first retired position: %v, want OUT_OF_RANGE", err)
			}
			return nil
		})
		rctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		resumed, err := next.retention.WatchDeletedImages(rctx, &metadatav1.WatchDeletedImagesRequest{ResumeToken: token, ImageTypes: panos})
		requireOK(t, err, "resume")
		if resp, err := resumed.Recv(); err == nil {
			t.Errorf("resuming after every deletion: %v, want nothing", resp)
		} else {
			requireCode(t, err, codes.DeadlineExceeded)
		}
	})
}

// TestDeletedImageWatchCap: a WatchDeletedImages stream beyond
// -max-deleted-image-watches is RESOURCE_EXHAUSTED at once, while other
// calls and streams are admitted; once it ends its place is free again.
func TestDeletedImageWatchCap(t *testing.T) {
	now := minute(0).Add(policy.Days(2))
	h := startServerOpts(t, openMemPebble(t), serverOpts{runPurges: true, outbox: true, now: func() time.Time { return now },
		limits: server.Limits{MaxDeletedImageWatches: 1}})
	purgeSingles(t, h)
	// open opens a stream and receives its first message: it holds its
	// place once that arrives.
	open := func(ctx context.Context) error {
		stream, err := h.retention.WatchDeletedImages(ctx, &metadatav1.WatchDeletedImagesRequest{})
		if err != nil {
			return err
		}
		_, err = stream.Recv()
		return err
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	requireOK(t, open(ctx), "the first stream")
	st := requireCode(t, open(t.Context()), codes.ResourceExhausted)
	if want := "1 WatchDeletedImages streams already open"; !strings.Contains(st.Message(), want) {
		t.Errorf("refused with %q, want %q", st.Message(), want)
	}
	_, err := h.retention.ListPurges(t.Context(), &metadatav1.ListPurgesRequest{})
	requireOK(t, err, "a unary call with every deleted-image watch taken")
	requirePurgeWatchable(t, h, "with every deleted-image watch taken")

	cancel()
	testwait.Until(t, 10*time.Second, func() error {
		sctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		return open(sctx)
	})
}

// TestWatchDeletedImagesRefusesATokenAheadOfTheOutbox: a resume_token
// past the outbox's end is OUT_OF_RANGE at once, naming the end in the
// message and in its ErrorInfo, from which the stream resumes; a token of
// neither form is INVALID_ARGUMENT. The tokens "1000000" and "9."
// on both backends: "9." is the form of Azure's tokens (a seal, no row),
// so there it is ahead, and "1000000" is not one. On the embedded store
// the end's next position, the first not given out, is ahead too.
func TestWatchDeletedImagesRefusesATokenAheadOfTheOutbox(t *testing.T) {
	t.Parallel() // independent: servers and tables of its own
	forEachBackend(t, func(t *testing.T, b backend) {
		now := minute(0).Add(policy.Days(2))
		h := startServerOpts(t, b.open(t), serverOpts{runPurges: true, outbox: true, now: func() time.Time { return now }})
		purgeSingles(t, h)
		ctx, cancel := context.WithTimeout(t.Context(), watchPatience)
		defer cancel()
		stream, err := h.retention.WatchDeletedImages(ctx, &metadatav1.WatchDeletedImagesRequest{})
		requireOK(t, err, "WatchDeletedImages")
		var end string
		for n := 0; n < 4; {
			resp, err := stream.Recv()
			requireOK(t, err, "receive the deleted images")
			n, end = n+len(resp.GetImages()), resp.GetResumeToken()
		}
		cancel()

		recv := func(token string) error {
			rctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			s, err := h.retention.WatchDeletedImages(rctx, &metadatav1.WatchDeletedImagesRequest{ResumeToken: token})
			if err == nil {
				_, err = s.Recv()
			}
			return err
		}
		ahead, bad := map[string][]string{"pebble": {"1000000"}, "azure": {"1000000.", "9."}}[b.name], map[string]string{"pebble": "9.", "azure": "1000000"}[b.name]
		if last, err := strconv.ParseUint(end, 10, 64); b.name == "pebble" && err == nil {
			ahead = append(ahead, strconv.FormatUint(last+1, 10)) // the first position not given out
		}
		for _, token := range ahead {
			st := requireCode(t, recv(token), codes.OutOfRange)
			if !strings.Contains(st.Message(), "past the end") || !strings.Contains(st.Message(), strconv.Quote(end)) {
				t.Errorf("%q refused with %q, want it said past the end, naming %q", token, st.Message(), end)
			}
			var named string
			for _, d := range st.Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok {
					named = info.GetMetadata()["resume_token"]
				}
			}
			if named != end {
				t.Errorf("%q refused with resume_token %q in its ErrorInfo, want %q", token, named, end)
			}
		}
		requireFieldViolation(t, recv(bad), "resume_token")
		requireCode(t, recv(end), codes.DeadlineExceeded) // the end: nothing yet, no error
	})
}
