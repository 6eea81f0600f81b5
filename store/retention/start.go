package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// Errors of Start.
var (
	// ErrNoKinds reports a purge of no image kind.
	ErrNoKinds = errors.New("retention: no image kind to purge")
	// ErrFutureCutoff reports a cutoff after now.
	ErrFutureCutoff = errors.New("retention: cutoff is in the future")
	// ErrCameraCutoff reports a delete of a camera given a cutoff or
	// policies: it deletes everything of the camera.
	ErrCameraCutoff = errors.New("retention: a delete of a camera takes no cutoff and no policies")
)

// StartRequest describes a purge.
type StartRequest struct {
	// Kinds to purge; each once, none repeated.
	Kinds []images.Kind
	// Cutoff retires rows captured before the start of its minute; not
	// after Now. Ignored with UsePolicies.
	Cutoff time.Time
	// UsePolicies gives each camera the cutoff of its retention policy
	// (now less its days); kinds that no policy sets a retention for are
	// left out of the job, and a job left with no kind fails with
	// ErrNoPolicies. Every purge, with policies or by Cutoff, spares the
	// cameras on legal hold.
	UsePolicies bool
	// DryRun counts without deleting.
	DryRun bool
	// Camera, when set, deletes every image of that one camera, whatever
	// its age: Cutoff and UsePolicies must be unset (ErrCameraCutoff). A
	// camera on legal hold is refused with ErrCameraHeld; a hold placed
	// while the job runs spares what is not yet deleted, as in any purge.
	Camera string
	// RowsPerSecond caps the rows the job deletes per second in each
	// process working on it, not across processes; Options.RowsPerSecond
	// applies too, and the lower binds. 0 means no cap of its own.
	RowsPerSecond float64
}

// Start records a new job and sets it running in the background. A purge
// that overlaps a running one fails with a *RunningError; a dry run deletes
// nothing and overlaps nothing.
func (e *Engine) Start(ctx context.Context, req StartRequest) (*Job, error) {
	if len(req.Kinds) == 0 {
		return nil, ErrNoKinds
	}
	now := e.opts.Now().UTC()
	if req.Camera != "" {
		if err := e.startCamera(ctx, &req); err != nil {
			return nil, err
		}
	} else if req.Cutoff.After(now) && !req.UsePolicies {
		return nil, fmt.Errorf("%w: %s is after %s", ErrFutureCutoff, req.Cutoff.Format(time.RFC3339), now.Format(time.RFC3339))
	}
	j := &Job{ID: newJobID(now), Cutoff: req.Cutoff.UTC(), DryRun: req.DryRun, State: Pending, Created: now, Unconfirmed: true,
		RowsPerSecond: max(0, req.RowsPerSecond), UsePolicies: req.UsePolicies,
		Outbox: e.outbox != nil && e.driver.JobKeepsOutbox(req.DryRun), Driver: e.driver.Name(), Camera: req.Camera}
	var reaches policy.Reaches
	if req.UsePolicies {
		var err error
		if reaches, err = e.policies.reaches(ctx); err != nil {
			return nil, err
		}
		j.Cutoff = time.Time{}
	}
	for _, k := range req.Kinds {
		if _, ok := e.repos[k]; !ok {
			return nil, fmt.Errorf("retention: no repository for kind %s", k)
		}
		if j.Progress(k) != nil {
			continue
		}
		p := &KindProgress{Kind: k, Phase: PhasePlan}
		if req.UsePolicies {
			rch, ok := reaches[k]
			if !ok {
				continue
			}
			if rch.Days > 0 {
				p.Cutoff = now.Add(-policy.Days(rch.Days))
				if p.Cutoff.After(j.Cutoff) {
					j.Cutoff = p.Cutoff
				}
			}
			if rch.ThinAfter > 0 {
				p.ThinThrough = now.Add(-policy.Days(rch.ThinAfter))
			}
		}
		j.Kinds = append(j.Kinds, p)
	}
	if len(j.Kinds) == 0 {
		return nil, ErrNoPolicies
	}
	// The job is recorded unconfirmed, so that it never runs unless this
	// Start reaches its last write, whatever happens before: the caller
	// going away, a store error, a crash. The writes run on their own
	// deadline, not the caller's: a caller cancelling halfway must not leave
	// the cleanup unable to run.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	err := e.start(wctx, ctx, j)
	if err != nil {
		if derr := errors.Join(e.jobs.remove(wctx, j.ID), e.driver.AbandonStart(wctx, j)); derr != nil {
			e.log.Warn("purge: removing a job that could not start failed; it never runs and ends failed later",
				"job", j.ID, "err", derr)
		}
		return nil, err
	}
	e.notify()
	e.launchStarted(j.ID)
	return j, nil
}

// startCamera readies a delete of every image of req.Camera: its cutoff
// is everything, for a camera not on legal hold.
func (e *Engine) startCamera(ctx context.Context, req *StartRequest) error {
	if req.UsePolicies || !req.Cutoff.IsZero() {
		return ErrCameraCutoff
	}
	req.Cutoff = everything
	return e.refuseHeld(ctx, req.Camera)
}

// startTimeout bounds Start's writes; an unconfirmed job older than
// abandonAfter was left by a Start that will never confirm it.
const (
	startTimeout = 30 * time.Second
	abandonAfter = 2 * startTimeout
)

// start records j, takes its locks and confirms it. A caller gone before
// the confirmation fails the start; after it, the job is started for good.
func (e *Engine) start(ctx, caller context.Context, j *Job) error {
	if err := e.jobs.create(ctx, j); err != nil {
		return err
	}
	if !j.DryRun {
		if err := e.jobs.lock(ctx, j); err != nil {
			return err
		}
	}
	if err := e.driver.StartJob(ctx, j); err != nil {
		return err
	}
	if err := caller.Err(); err != nil {
		return err
	}
	_, err := e.jobs.update(ctx, j.ID, func(j *Job) error {
		j.Unconfirmed = false
		return nil
	})
	j.Unconfirmed = err != nil
	return err
}
