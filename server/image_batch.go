package server

import (
	"context"
	"fmt"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"

	"github.com/metadatad/metadatad/store/images"
)

// batchCreated is the outcome of one image of a BatchCreate call, before
// its kind's result message is built.
type batchCreated[M imageMessage] struct {
	metadata M
	existed  bool
	status   *spb.Status
}

// batchCreate serves the BatchCreate RPC of every image kind: the call
// fails as a whole only when it holds no image or more than
// images.MaxBatchCreate; otherwise each image gets the status Create would
// have given it alone, its field violations named after its position.
func (h *imageHandler[M]) batchCreate(ctx context.Context, ms []M) ([]batchCreated[M], error) {
	var v violations
	switch {
	case len(ms) == 0:
		v.add("metadata", "required")
	case len(ms) > images.MaxBatchCreate:
		v.add("metadata", fmt.Sprintf("at most %d images, got %d", images.MaxBatchCreate, len(ms)))
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	out := make([]batchCreated[M], len(ms))
	valid := make([]images.Image, 0, len(ms))
	at := make([]int, 0, len(ms))
	for i, m := range ms {
		img, err := checkImage(m, fmt.Sprintf("metadata[%d]", i))
		if err != nil {
			out[i].status = status.Convert(err).Proto()
			continue
		}
		valid = append(valid, img)
		at = append(at, i)
	}
	for j, res := range h.repo.BatchCreate(ctx, valid) {
		i := at[j]
		if res.Err != nil {
			out[i].status = status.Convert(h.createError(ctx, valid[j], res.Err, fmt.Sprintf("metadata[%d]", i))).Proto()
			continue
		}
		h.feed.Publish(res.Image)
		out[i] = batchCreated[M]{metadata: h.fromImage(res.Image), existed: res.Existed, status: &spb.Status{}}
	}
	return out, nil
}
