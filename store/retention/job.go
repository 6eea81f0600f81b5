package retention

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/images"
)

// State is where a job is in its life.
type State string

// The job states.
const (
	Pending   State = "pending"
	Running   State = "running"
	Succeeded State = "succeeded"
	Failed    State = "failed"
	// Cancelled: stopped at a task boundary on request; its counts are
	// what it deleted, and the next purge deletes the rest.
	Cancelled State = "cancelled"
)

// Terminal reports whether the job has ended.
func (s State) Terminal() bool { return s == Succeeded || s == Failed || s == Cancelled }

// Counts are the progress counts of one kind, or of a job.
type Counts struct {
	DevicesTotal  int64 `json:"devicesTotal"`
	DevicesDone   int64 `json:"devicesDone"`
	DevicesFailed int64 `json:"devicesFailed"`
	// MetadataRows counts deleted primary rows (in a dry run: to delete),
	// as each delete reports them, so rows created with expired capture
	// times while the purge runs are counted when it deletes them. One case
	// stays short: a task cut short after a camera's delete and before
	// recording it (a crash, a lost store answer, a second delivery after
	// the first lost its visibility), while such creates landed between
	// that camera's count and its delete, reports those rows not. Such a
	// count is flagged MetadataRowsLowerBound.
	MetadataRows int64 `json:"metadataRows"`
	// MetadataRowsLowerBound says MetadataRows may be short: a delivery
	// of a task found fewer expired rows of a camera than were counted
	// before its first delete, so an earlier delivery deleted them and
	// stopped before recording what it removed (see deletedRows).
	MetadataRowsLowerBound bool `json:"metadataRowsLowerBound,omitempty"`
	// IndexRows counts deleted index rows (in a dry run: to delete). On
	// the queue design it counts the index rows of the deleted primary
	// rows, one per primary row, whichever pass deleted them (a worker, or
	// the janitor after a crash between the two): it equals MetadataRows
	// and is exact, or a lower bound, with it. Orphans of creates that
	// never wrote their primary row are deleted uncounted (see janitor).
	IndexRows int64 `json:"indexRows"`
	// DevicesHeld counts the cameras with rows the purge would delete or
	// thin that a legal hold spared, placed before the purge or while it
	// ran, before their deletes began; they are in DevicesTotal too.
	DevicesHeld int64 `json:"devicesHeld,omitempty"`
	// ThinnedRows counts the primary rows of MetadataRows that thinning
	// tiers deleted rather than age (their index rows are in IndexRows).
	ThinnedRows int64 `json:"thinnedRows,omitempty"`
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.DevicesTotal += o.DevicesTotal
	c.DevicesDone += o.DevicesDone
	c.DevicesFailed += o.DevicesFailed
	c.MetadataRows += o.MetadataRows
	c.IndexRows += o.IndexRows
	c.DevicesHeld += o.DevicesHeld
	c.ThinnedRows += o.ThinnedRows
	c.MetadataRowsLowerBound = c.MetadataRowsLowerBound || o.MetadataRowsLowerBound
}

// Phases of one kind's purge that the engine knows: the first and the
// last. A driver names the others (queue.go: work, janitor; the embedded
// driver: orphans).
const (
	PhasePlan = "plan"
	PhaseDone = "done"
)

// KindProgress is one kind's part of a job.
type KindProgress struct {
	Kind   images.Kind `json:"kind"`
	Counts Counts      `json:"counts"`
	// Phase is where the kind's purge is: PhasePlan, a phase of the
	// driver's, or PhaseDone.
	Phase string `json:"phase"`
	// Cutoff, in a purge with policies, is the kind's newest cutoff in
	// force (of its shortest retention): the index is scanned up to it.
	Cutoff time.Time `json:"cutoff,omitzero"`
	// ThinThrough, in a purge with policies, is the newest instant any
	// policy's tiers thin the kind at (now less their fewest after_days);
	// zero when none does. The embedded purge reads tallies up to it.
	ThinThrough time.Time `json:"thinThrough,omitzero"`
	// driverRaw and driverState are the driver's own progress
	// (DriverState), kept in the job's record with the rest but no part of
	// what the engine or its callers read: as recorded, and as decoded.
	driverRaw   json.RawMessage
	driverState any
}

// DriverState is the driver's own progress of a kind, of the driver's type
// T, kept in the job's record: decoded from the record at its first call,
// then the same *T, changed in place, until the record is written. A
// record decodes into the T that wrote it, since a job is only ever run by
// the driver that recorded it (Job.Driver); were it to fail, the state
// would start afresh.
func DriverState[T any](p *KindProgress) *T {
	if s, ok := p.driverState.(*T); ok {
		return s
	}
	s := new(T)
	if len(p.driverRaw) > 0 {
		_ = json.Unmarshal(p.driverRaw, s)
	}
	p.driverState = s
	return s
}

// kindRecord is a KindProgress as the job's record holds it, its
// driver's progress included.
type kindRecord struct {
	kindPublic
	Driver json.RawMessage `json:"driver,omitempty"`
}

// kindPublic is KindProgress without its methods, for kindRecord.
type kindPublic KindProgress

// MarshalJSON writes the kind's progress with its driver's.
func (p KindProgress) MarshalJSON() ([]byte, error) {
	r := kindRecord{kindPublic: kindPublic(p), Driver: p.driverRaw}
	if p.driverState != nil {
		b, err := json.Marshal(p.driverState)
		if err != nil {
			return nil, err
		}
		r.Driver = b
	}
	if string(r.Driver) == "{}" {
		r.Driver = nil
	}
	return json.Marshal(r)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (p *KindProgress) UnmarshalJSON(b []byte) error {
	var r kindRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return err
	}
	*p = KindProgress(r.kindPublic)
	p.driverRaw = r.Driver
	return nil
}

// Job is one purge.
type Job struct {
	ID string `json:"id"`
	// Cutoff is the instant given; rows captured before the start of its
	// minute are retired.
	Cutoff  time.Time       `json:"cutoff"`
	DryRun  bool            `json:"dryRun"`
	State   State           `json:"state"`
	Kinds   []*KindProgress `json:"kinds"`
	Created time.Time       `json:"created"`
	Started time.Time       `json:"started,omitzero"`
	Ended   time.Time       `json:"ended,omitzero"`
	// Error says why the job failed; safe to show to clients.
	Error string `json:"error,omitempty"`
	// Owner is the engine running the job until LeaseUntil; another engine
	// sharing the store takes the job over once the lease has run out.
	Owner      string    `json:"owner,omitempty"`
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
	// LeaseEpoch counts the lease's acquisitions: the owner's writes of
	// the job and its tasks hold only while it is the one it took (see
	// owner.go).
	LeaseEpoch int64 `json:"leaseEpoch,omitempty"`
	// Unconfirmed marks a job whose Start has not finished: it never runs.
	// Start's last write clears it; a job left unconfirmed by a Start that
	// failed, was cancelled or crashed ends failed (see abandonStart).
	Unconfirmed bool `json:"unconfirmed,omitempty"`
	// CancelRequested asks the job to stop at its next task boundary; the
	// engine running it, on whichever replica, ends it Cancelled.
	CancelRequested bool `json:"cancelRequested,omitempty"`
	// RowsPerSecond is the job's own cap on deletes; see StartRequest.
	RowsPerSecond float64 `json:"rowsPerSecond,omitempty"`
	// UsePolicies gives each camera the cutoff of its retention policy,
	// counted from Created; Cutoff is then the newest of them.
	UsePolicies bool `json:"usePolicies,omitempty"`
	// LostTask names a task whose record its last delivery could not
	// write (see Engine.unrecorded): the job ends failed.
	LostTask string `json:"lostTask,omitempty"`
	// Outbox, in the queue design, says the job's deletes write the
	// outbox of deleted images (outboxseal.go).
	Outbox bool `json:"outbox,omitempty"`
	// Driver names the purge design that recorded the job (driver.go): a
	// job of another, or of an earlier release, which has none, ends
	// failed rather than resume on progress it does not know.
	Driver string `json:"driver,omitempty"`
	// Camera, when set, makes the job a delete on purpose of every image
	// of that one camera (StartRequest.Camera): its rule is "everything"
	// for the camera and "nothing" for every other (Rules).
	Camera string `json:"camera,omitempty"`
}

// Boundary is the start of the cutoff's minute: every row captured before
// it is expired, and the index partitions before its minute hold only such rows.
func (j *Job) Boundary() time.Time { return j.Cutoff.UTC().Truncate(time.Minute) }

// KindBoundary is the start of the minute of the kind's cutoff, the newest in
// force in a purge with policies: the index partitions before it are the
// ones the purge scans.
func (j *Job) KindBoundary(kind images.Kind) time.Time {
	if j.UsePolicies {
		return j.Progress(kind).Cutoff.UTC().Truncate(time.Minute)
	}
	return j.Boundary()
}

// Reach is the newest instant before which the kind's rows may go: its
// boundary, or the end of the newest window its policies' tiers thin. The
// index is scanned up to it.
func (j *Job) Reach(kind images.Kind) time.Time {
	return store.MaxTime(j.KindBoundary(kind), j.Progress(kind).ThinThrough)
}

// Totals are the counts summed over the job's kinds.
func (j *Job) Totals() Counts {
	var c Counts
	for _, k := range j.Kinds {
		c.Add(k.Counts)
	}
	return c
}

// ImageKinds lists the kinds the job purges.
func (j *Job) ImageKinds() []images.Kind {
	out := make([]images.Kind, len(j.Kinds))
	for i, k := range j.Kinds {
		out[i] = k.Kind
	}
	return out
}

// Progress is the kind's part of the job; nil if the job does not purge it.
func (j *Job) Progress(kind images.Kind) *KindProgress {
	i := slices.IndexFunc(j.Kinds, func(p *KindProgress) bool { return p.Kind == kind })
	if i < 0 {
		return nil
	}
	return j.Kinds[i]
}
