package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// Deletes on purpose (issue 45): one image, or every image of one camera.
// A camera's images go by a purge job (StartRequest.Camera) whose rule
// gives that camera "everything" and every other "nothing" (Rules), so
// both designs' own paths delete them, counted, resumable, cancellable and
// watched as any purge. One image goes by its driver's ImageDeleter, which
// deletes its primary and index rows and names it in the outbox of deleted
// images. A camera on legal hold is refused both.

// ErrCameraHeld refuses a delete on purpose of a camera on legal hold.
var ErrCameraHeld = errors.New("retention: the camera is on legal hold")

// everything is the boundary of a camera's delete: every image captured
// before it goes, which is every image the API accepts (captures run to
// the end of year 9999) but those of its last two days, since the day and
// minute a store counts after the boundary (a section's horizon) must
// still have a year of four digits.
var everything = time.Date(9999, 12, 30, 0, 0, 0, 0, time.UTC)

// An ImageDeleter is a Driver that deletes one image on purpose: both
// designs are. DeleteImage deletes the image of the kind stored under the
// camera's partition at row (its capture instant's row key): its primary
// row, then or with it its index row, and, with Options.Outbox, names it
// once in the outbox of deleted images. It returns
// store.ErrNotFound for an image that is not there, and finishes, as a
// retry, a delete cut short after the primary row went. The pointer rows
// need nothing: their reads verify the rows they point to
// (images/pointer.go), so the camera's latest is the previous image.
type ImageDeleter interface {
	DeleteImage(ctx context.Context, kind images.Kind, camera, row string) error
}

// DeleteImageRequest names one image to delete on purpose.
type DeleteImageRequest struct {
	Kind       images.Kind
	CameraID   string
	CapturedAt time.Time
}

// DeleteImage deletes one image on purpose (ImageDeleter): ErrCameraHeld
// for a camera on legal hold, store.ErrNotFound for an image that is not
// there. (Images carry no ETag, so a delete has no precondition.)
func (e *Engine) DeleteImage(ctx context.Context, req DeleteImageRequest) error {
	if _, ok := e.repos[req.Kind]; !ok {
		return fmt.Errorf("retention: no repository for kind %s", req.Kind)
	}
	d, ok := e.driver.(ImageDeleter)
	if !ok {
		return fmt.Errorf("retention: driver %s deletes no single image", e.driver.Name())
	}
	if err := e.refuseHeld(ctx, req.CameraID); err != nil {
		return err
	}
	row := store.InvertedTicksRowKey(store.TruncateToTicks(req.CapturedAt))
	return d.DeleteImage(ctx, req.Kind, req.CameraID, row)
}

// refuseHeld returns ErrCameraHeld for a camera on legal hold.
func (e *Engine) refuseHeld(ctx context.Context, camera string) error {
	holds, err := e.policies.holdSet(ctx)
	if err != nil {
		return err
	}
	if holds.Has(camera) {
		return fmt.Errorf("%w: %s", ErrCameraHeld, camera)
	}
	return nil
}
