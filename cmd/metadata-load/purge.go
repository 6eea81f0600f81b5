package main

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
)

var imageTypes = map[kind]metadatav1.ImageType{
	single: metadatav1.ImageType_IMAGE_TYPE_SINGLE, pano: metadatav1.ImageType_IMAGE_TYPE_PANO,
	preStitch: metadatav1.ImageType_IMAGE_TYPE_PRE_STITCH,
}

// purgeDuring runs the workload and starts a purge of the fleet's image
// types halfway (by duration, or by calls with -ops). Calls are split by
// when they start: before the purge, while it runs, after it ended; and
// into windows of equal length from the purge's start and just before it,
// a -duration workload running on until the purge's window closes.
func (r *runner) purgeDuring(ctx context.Context) error {
	before, during, after := newRecorder(), newRecorder(), newRecorder()
	var current atomic.Pointer[recorder]
	current.Store(before)
	pr := &purgeReport{}
	var purgeErr error
	var once sync.Once
	done, hold := make(chan struct{}), make(chan struct{})
	started := time.Now()
	trigger := func() {
		once.Do(func() {
			go func() {
				defer close(done)
				purgeErr = r.purge(ctx, &current, during, after, started, pr)
				time.AfterFunc(time.Until(during.started.Add(r.cfg.minSpan)), func() { close(hold) })
			}()
		})
	}
	lc := r.cfg.load
	calls := &callLog{}
	p := phase{label: "purge-during", load: lc, recorder: current.Load, log: calls, hold: hold}
	if lc.ops > 0 {
		p.onCall = func(n int64) {
			if n > lc.ops/2 {
				trigger()
			}
		}
	}
	if lc.duration > 0 {
		defer time.AfterFunc(lc.duration/2, trigger).Stop()
	}
	r.w.run(ctx, p, r.show)
	ran := span{started, time.Now()}
	current.Load().end()
	trigger() // a run that ended early still purges, without load
	<-done

	// Calls record into the recorder of the phase they started in, some
	// after it ended: the phases are summed up once every call is done.
	pr.Before, pr.During = before.summary(), during.summary()
	if s := after.summary(); s.Calls > 0 {
		pr.After = s
	}
	pr.P50Ratio, pr.P99Ratio = map[string]float64{}, map[string]float64{}
	if pr.During.Calls > 0 {
		latencyRatios(pr.During, pr.Before, p50, "", "", pr.P50Ratio)
		latencyRatios(pr.During, pr.Before, p99, "", "", pr.P99Ratio)
	}
	pr.Window = calls.windows(span{during.started, after.started}, r.cfg.minSpan, ran)
	r.rep.Purge = pr
	if purgeErr != nil {
		return purgeErr
	}
	if pr.State != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED.String() {
		return errors.New("purge ended " + pr.State + ": " + pr.Error)
	}
	return nil
}

// purge starts the purge, switches the workload's recorder for its
// duration (to during) and follows it to its end, when after takes over.
func (r *runner) purge(ctx context.Context, current *atomic.Pointer[recorder], during, after *recorder, runStart time.Time, pr *purgeReport) error {
	during.started = time.Now()
	current.Swap(during).end()
	pr.StartedAfterSeconds = round(time.Since(runStart).Seconds())
	defer func() {
		after.started = time.Now()
		current.Store(after)
		during.end()
		pr.Seconds = round(during.elapsed().Seconds())
	}()
	pr.Cutoff = time.Now().Add(-r.cfg.purgeAge).UTC()
	req := &metadatav1.StartPurgeRequest{Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamppb.New(pr.Cutoff)}}
	for _, k := range r.cfg.fleet.kinds {
		req.ImageTypes = append(req.ImageTypes, imageTypes[k])
	}
	resp, err := r.w.conns[0].retention.StartPurge(ctx, req)
	if err != nil {
		return err
	}
	pr.JobID = resp.GetJob().GetJobId()
	stream, err := r.w.conns[0].retention.WatchPurge(ctx, &metadatav1.WatchPurgeRequest{JobId: pr.JobID})
	if err != nil {
		return err
	}
	job := resp.GetJob()
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		job = msg.GetJob()
	}
	pr.State, pr.Error = job.GetState().String(), job.GetError()
	pr.DevicesTotal, pr.MetadataRowsDeleted, pr.IndexRowsDeleted = job.GetDevicesTotal(), job.GetMetadataRowsDeleted(), job.GetIndexRowsDeleted()
	if job.GetStartTime() != nil && job.GetEndTime() != nil {
		// To the microsecond: an idle purge takes a few milliseconds.
		pr.JobSeconds = job.GetEndTime().AsTime().Sub(job.GetStartTime().AsTime()).Round(time.Microsecond).Seconds()
	}
	return nil
}
