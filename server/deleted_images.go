package server

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// deletedImagesPage is how many outbox rows one read of WatchDeletedImages
// takes, and so at most how many images one response holds.
const deletedImagesPage = 500

// WatchDeletedImages sends the outbox of deleted images from the request's
// token on, then each new deletion as its purge commits it.
func (s *retentionService) WatchDeletedImages(req *metadatav1.WatchDeletedImagesRequest, stream grpc.ServerStreamingServer[metadatav1.WatchDeletedImagesResponse]) error {
	ctx := stream.Context()
	var v violations
	after := req.GetResumeToken()
	if s.engine.CheckResumeToken(after) != nil {
		v.add("resume_token", "not a resume_token of WatchDeletedImages")
	}
	want := map[images.Kind]bool{}
	for i, t := range req.GetImageTypes() {
		kind, ok := imageTypes[t]
		if !ok {
			v.add(fmt.Sprintf("image_types[%d]", i), fmt.Sprintf("unknown image type %v", t))
			continue
		}
		want[kind] = true
	}
	if err := v.err(); err != nil {
		return err
	}
	if !s.engine.KeepsOutbox() {
		return status.Error(codes.FailedPrecondition, "this server keeps no record of deleted images: start it with -retention-outbox")
	}
	for {
		changed := s.engine.Changed()
		page, err := s.engine.DeletedImages(ctx, after, deletedImagesPage)
		if errors.Is(err, retention.ErrOutboxTrimmed) {
			return status.Error(codes.OutOfRange, "the deleted images after that resume_token were retired (-purge-job-retention); start again without one")
		}
		var ahead *retention.AheadError
		if errors.As(err, &ahead) {
			return aheadStatus(ahead)
		}
		if err != nil {
			return toStatus(ctx, s.log, err)
		}
		if len(page) > 0 {
			// A page of only other types is sent too, without images: the
			// client's token moves past it, so that a resume does not fall
			// behind the outbox's retention for deletions it did not ask for.
			resp := &metadatav1.WatchDeletedImagesResponse{}
			for _, d := range page {
				if len(want) == 0 || want[d.Kind] {
					resp.Images = append(resp.Images, deletedImage(d))
				}
			}
			after = page[len(page)-1].Token
			resp.ResumeToken = after
			if err := stream.Send(resp); err != nil {
				return err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return toStatus(ctx, s.log, ctx.Err())
		case <-s.stopping:
			return status.Error(codes.Unavailable, "server shutting down; watch again with the last resume_token")
		case <-changed:
		case <-time.After(watchPoll):
		}
	}
}

// aheadStatus refuses a resume_token past the outbox's end, naming the
// end in the message and in an ErrorInfo's metadata resumeTokenKey.
func aheadStatus(ahead *retention.AheadError) error {
	st := status.Newf(codes.OutOfRange, "resume_token %q is past the end of the deleted images this server keeps: its store was "+
		"restored from an older backup (the records after the backup are lost), or the token is another store's. If the store was "+
		"restored, resume from %q, the end it holds, to get every deletion made since; otherwise start again without a resume_token",
		ahead.Token, ahead.End)
	return errorInfoStatus(st, resumeTokenAheadReason, map[string]string{resumeTokenKey: ahead.End}).Err()
}

// resumeTokenAheadReason is the google.rpc.ErrorInfo reason of a
// WatchDeletedImages refused for a resume_token past the outbox's end.
const resumeTokenAheadReason = "RESUME_TOKEN_AHEAD"

func deletedImage(d retention.DeletedImage) *metadatav1.DeletedImage {
	return &metadatav1.DeletedImage{
		ImageType: imageTypeOf(d.Kind), CameraId: d.CameraID, CapturedAt: timestamppb.New(d.CapturedAt),
		BlobUri: d.BlobURI, PurgeJobId: d.JobID, DeleteTime: timestamppb.New(d.DeletedAt),
	}
}
