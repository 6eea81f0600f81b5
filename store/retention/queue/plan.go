package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/retention"
)

// maxTaskIDBytes bounds the camera ids of one task, so the task record (a
// few properties of taskDocChunk) stays far under the 1 MiB entity limit
// whatever the ids' lengths.
const maxTaskIDBytes = 64 << 10

// cameraBytes is what planning counts against Options.CameraMemory for one
// camera id held in a set: its bytes plus the set's own overhead.
func cameraBytes(id string) int { return len(id) + 64 }

// bucketOf assigns a camera to one of n buckets, the same in every process.
func bucketOf(camera string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(camera))
	return int(h.Sum64() % uint64(n))
}

// cameraSet is a set of camera ids that reports when it outgrows its limit.
type cameraSet struct {
	ids   map[string]struct{}
	bytes int
	limit int
}

func newCameraSet(limit int) *cameraSet {
	return &cameraSet{ids: map[string]struct{}{}, limit: limit}
}

// add adds id and reports whether it was new.
func (s *cameraSet) add(id string) bool {
	if _, ok := s.ids[id]; ok {
		return false
	}
	s.ids[id] = struct{}{}
	s.bytes += cameraBytes(id)
	return true
}

func (s *cameraSet) full() bool { return s.bytes > s.limit }

// plan scans the expired index, groups the cameras it finds into tasks and
// sends each through the queue, holding at most Options.CameraMemory of
// camera ids (plus one group and one page of the scan), whatever the
// number of cameras or rows.
//
// A camera has expired rows in many minutes, so the scan meets it many
// times; each camera must be planned once. The cameras are split into
// hash buckets, planned one scan each: a scan plans the cameras of its
// bucket, deduplicated by a set of them. One bucket is the rule; when a
// bucket's cameras outgrow the memory, the plan starts over with twice the
// buckets, and the cameras already in tasks are skipped. The buckets and
// the next bucket are kept on the job, so after a crash the plan goes on
// from its last finished bucket. The recorded tasks not yet done are sent
// again at the start, since their first message may never have left.
func (e *driver) plan(ctx context.Context, j *retention.Job, kind images.Kind) error {
	p := j.Progress(kind)
	seq := 0
	if err := e.tasks.each(ctx, j.ID, kind, func(t *task) error {
		seq++
		if t.Done {
			return nil
		}
		return e.send(ctx, t)
	}); err != nil {
		return err
	}
	pl := &planner{e: e, job: j, kind: kind, seq: seq}
	buckets, bucket := max(queueState(p).Buckets, 1), queueState(p).Bucket
	before, started := queueState(p).BucketsSeq, queueState(p).BucketSeq
	for bucket < buckets {
		fits, err := pl.planBucket(ctx, bucket, buckets, before, started)
		if err != nil {
			return err
		}
		if fits {
			bucket++
		} else {
			buckets, bucket, before = 2*buckets, 0, pl.seq
			e.log.Info("purge: the expired cameras outgrow the plan's memory; planning them in more buckets",
				"job", j.ID, "kind", kind.String(), "buckets", buckets)
		}
		started = pl.seq
		if _, err := e.updateJob(ctx, j.ID, func(j *retention.Job) error {
			q := j.Progress(kind)
			queueState(q).Buckets, queueState(q).Bucket, queueState(q).BucketsSeq, queueState(q).BucketSeq = buckets, bucket, before, started
			return nil
		}); err != nil {
			return err
		}
	}
	// The job's totals are the tasks', read once more now that none is
	// added: a crash between a task's record and the job's update left the
	// running total short.
	var tasks int
	var devices int64
	if err := e.tasks.each(ctx, j.ID, kind, func(t *task) error {
		tasks++
		devices += int64(len(t.Devices))
		return nil
	}); err != nil {
		return err
	}
	_, err := e.updateJob(ctx, j.ID, func(j *retention.Job) error {
		q := j.Progress(kind)
		queueState(q).Tasks, q.Counts.DevicesTotal = tasks, devices
		return nil
	})
	return err
}

// planner makes the tasks of one kind's plan.
type planner struct {
	e    *driver
	job  *retention.Job
	kind images.Kind
	// seq is the number of the next task.
	seq int
}

// planBucket plans the cameras of one bucket of n not yet in a task. It
// reports false, having planned some of them, if they outgrow the memory.
//
// With n buckets since task before, a camera of the bucket can be in a
// task made before that (under fewer buckets) or by this pass before a
// crash (from task started on); the passes of other buckets in between
// planned other cameras. Only those tasks are read, so that a plan of many
// buckets does not read every task in each.
func (p *planner) planBucket(ctx context.Context, bucket, n, before, started int) (bool, error) {
	seen, err := p.plannedCameras(ctx, bucket, n, before, started)
	if errors.Is(err, errOutgrown) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var group []*taskDevice
	groupBytes := 0
	flush := func() error {
		if len(group) == 0 {
			return nil
		}
		err := p.writeTask(ctx, group)
		group, groupBytes = nil, 0
		return err
	}
	rules, err := p.e.rules(ctx, p.job, p.kind)
	if err != nil {
		return false, err
	}
	expired := images.ExpiredIndex(p.job.Reach(p.kind))
	err = p.e.repos[p.kind].EachIndexRow(ctx, expired, func(row images.IndexRow) error {
		device := row.CameraID
		if device == "" || bucketOf(device, n) != bucket || !seen.add(device) {
			return nil
		}
		// The scan meets a camera first at its oldest row: if that one is
		// not expired by the camera's own cutoff, none is, and the camera
		// costs nothing more (unless its tiers thin it). A held camera is
		// planned held: counted, never deleted.
		c, err := planRule(ctx, rules, device, row)
		if err != nil {
			return err
		}
		d := &taskDevice{ID: device}
		if p.job.UsePolicies {
			d.Boundary, d.NoAge, d.Thin = c.Boundary, !c.Purge, c.Thin
		}
		if c.Held {
			d.State = deviceHeld
		}
		if c.Purge || len(c.Thin) > 0 || c.Held {
			group = append(group, d)
			if groupBytes += len(device); len(group) >= p.e.tune.GroupSize || groupBytes >= maxTaskIDBytes {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if seen.full() {
			return errOutgrown
		}
		return nil
	})
	if errors.Is(err, errOutgrown) {
		return false, flush()
	}
	if err != nil {
		return false, err
	}
	return true, flush()
}

// plannedCameras are the bucket's cameras the job's tasks already name:
// those of tasks before before, and of every task from started (a
// resumed planner's own). errOutgrown says they are more than the
// planner's memory holds.
func (p *planner) plannedCameras(ctx context.Context, bucket, n, before, started int) (*cameraSet, error) {
	seen := newCameraSet(p.e.tune.CameraMemory)
	remember := func(t *task) (bool, error) {
		for _, d := range t.Devices {
			if bucketOf(d.ID, n) == bucket {
				seen.add(d.ID)
			}
		}
		if seen.full() {
			return false, errOutgrown
		}
		return true, nil
	}
	var err error
	if before > 0 {
		err = p.e.tasks.from(ctx, p.job.ID, p.kind, 0, func(t *task) (bool, error) {
			if t.Seq >= before {
				return false, nil
			}
			return remember(t)
		})
	}
	if err == nil {
		err = p.e.tasks.from(ctx, p.job.ID, p.kind, max(started, before), remember)
	}
	return seen, err
}

// writeTask writes the next task, of group's cameras (with their
// boundaries when the job uses policies), queues it and adds its cameras
// to the job's total; retention.ErrCancelled when the job was cancelled meanwhile.
func (p *planner) writeTask(ctx context.Context, group []*taskDevice) error {
	t := &task{JobID: p.job.ID, Kind: p.kind, Seq: p.seq, Devices: group}
	if p.job.UsePolicies {
		if err := p.e.tasks.recordBoundaries(ctx, t); err != nil {
			return err
		}
	}
	if err := p.e.tasks.create(ctx, t); err != nil {
		return err
	}
	if err := p.e.send(ctx, t); err != nil {
		return err
	}
	j, err := p.e.updateJob(ctx, p.job.ID, func(j *retention.Job) error {
		j.Progress(p.kind).Counts.DevicesTotal += int64(len(group))
		return nil
	})
	if err != nil {
		return err
	}
	p.seq++
	if j.CancelRequested {
		return retention.ErrCancelled
	}
	return nil
}

// errOutgrown stops a scan whose cameras outgrow the plan's memory.
var errOutgrown = errors.New("retention: cameras outgrow the plan's memory")

func (e *driver) send(ctx context.Context, t *task) error {
	body, err := json.Marshal(taskMessage{JobID: t.JobID, Kind: t.Kind, Seq: t.Seq})
	if err != nil {
		return fmt.Errorf("retention: encode message: %w", err)
	}
	if err := e.queue.Send(ctx, body); err != nil {
		return err
	}
	e.notify()
	return nil
}

// dryRun counts what a purge of kind would delete, without deleting, in
// the plan's bounded memory: one scan per bucket of cameras, with as many
// buckets as it takes for one bucket's cameras to fit.
func (e *driver) dryRun(ctx context.Context, j *retention.Job, kind images.Kind) error {
	for buckets := 1; ; buckets *= 2 {
		c, fits, err := e.dryRunBuckets(ctx, j, kind, buckets)
		if err != nil {
			return err
		}
		if fits {
			_, err = e.updateJob(ctx, j.ID, func(j *retention.Job) error {
				j.Progress(kind).Counts = c
				return nil
			})
			return err
		}
	}
}

// dryRunBuckets counts with n buckets; false if a bucket outgrows the memory.
func (e *driver) dryRunBuckets(ctx context.Context, j *retention.Job, kind images.Kind, n int) (retention.Counts, bool, error) {
	repo := e.repos[kind]
	primary, _ := repo.Tables()
	var c retention.Counts
	rules, err := e.rules(ctx, j, kind)
	if err != nil {
		return retention.Counts{}, false, err
	}
	for bucket := range n {
		// Each camera seen, with its boundary: the job's, or in a purge
		// with policies its own, zero if its rows are kept.
		seen := newCameraBounds(e.tune.CameraMemory)
		err := repo.EachIndexRow(ctx, images.ExpiredIndex(j.Reach(kind)), func(row images.IndexRow) error {
			device := row.CameraID
			if _, ok := seen.of[device]; ok || device == "" || bucketOf(device, n) != bucket {
				return nil
			}
			rule, err := planRule(ctx, rules, device, row)
			if err != nil {
				return err
			}
			d := &taskDevice{ID: device}
			if j.UsePolicies {
				d.Boundary, d.NoAge, d.Thin = rule.Boundary, !rule.Purge, rule.Thin
			}
			seen.put(device, d.janitorBound())
			if seen.full() {
				return errOutgrown
			}
			if !rule.Purge && len(rule.Thin) == 0 && !rule.Held {
				return nil // kept whole: another camera than a camera delete's
			}
			if rule.Held {
				c.DevicesTotal++
				c.DevicesHeld++
				return nil
			}
			count, thinned, err := e.countCamera(ctx, kind, primary, d, j)
			if err != nil || count == 0 {
				return err
			}
			c.DevicesTotal++
			c.DevicesDone++
			c.MetadataRows += count
			c.IndexRows += count // one per primary row, as a purge counts them
			c.ThinnedRows += thinned
			return nil
		})
		if errors.Is(err, errOutgrown) {
			return retention.Counts{}, false, nil
		}
		if err != nil {
			return retention.Counts{}, false, err
		}
	}
	return c, true, nil
}
