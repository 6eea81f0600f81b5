package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/metadatad/metadatad/store/images"
)

// Defaults of Options.
const (
	// DefaultWindow covers a camera that uploads some minutes late, and the
	// index lag of a create on Azure (IndexLag: 2 minutes by default).
	DefaultWindow = 5 * time.Minute
	// DefaultBuffer is the events a subscription holds for a slow reader
	// before it is dropped.
	DefaultBuffer = 1024
)

// ClockSkew is how far the clocks of two replicas may disagree: Since reads
// this much further back, as a Stamp may come from another replica's clock.
const ClockSkew = time.Minute

// MaxResumeAge is how old a Stamp callers may give Since: it reads every
// index partition from the Stamp on, which must stay bounded.
const MaxResumeAge = time.Hour

// Options configures New.
type Options struct {
	// Repo is the repository of the feed's image kind; required.
	Repo *images.Repository
	// Poll, when positive, makes the feed find new images by scanning the
	// index at this interval (Run), for a store that several replicas write;
	// Publish then does nothing. 0: only Publish feeds it.
	Poll time.Duration
	// Window is how far from the moment an image becomes readable its
	// captured_at may lie for the feed to hold it; 0 means DefaultWindow.
	// With Poll it must exceed Repo.IndexLag().
	Window time.Duration
	// Buffer is how many events a subscription holds; 0 means
	// DefaultBuffer.
	Buffer int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives the tail's failed passes; nil means slog.Default.
	Logger *slog.Logger
}

// Event is one new image.
type Event struct {
	Image images.Image
	// Stamp orders the events: Since from it reads every image delivered
	// with this Stamp or a later one.
	Stamp time.Time
}

// Feed fans one image kind's new images out to subscriptions.
type Feed struct {
	repo   *images.Repository
	poll   time.Duration
	window time.Duration
	buffer int
	now    func() time.Time
	log    *slog.Logger
	// primed is closed once Subscribe can begin: at once without a tail,
	// else after the tail's first pass has learnt what already exists.
	primed chan struct{}
	// tail, with Options.Poll, finds the new images; nil without.
	tail *tail

	mu sync.Mutex
	// last is the latest Stamp given, so Stamps never go back.
	last     time.Time
	byCamera map[string]map[*Subscription]struct{}
}

// New makes a feed; with Options.Poll its tail runs in Run.
func New(opts Options) (*Feed, error) {
	if opts.Repo == nil {
		return nil, errors.New("feed: Options needs the Repo")
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Poll > 0 && opts.Window <= opts.Repo.IndexLag() {
		return nil, fmt.Errorf("feed: Window %s must exceed the index lag %s: a primary row may land that long after its index row", opts.Window, opts.Repo.IndexLag())
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &Feed{repo: opts.Repo, poll: opts.Poll, window: opts.Window, buffer: opts.Buffer, now: opts.Now, log: opts.Logger,
		primed: make(chan struct{}), byCamera: make(map[string]map[*Subscription]struct{})}
	if f.poll <= 0 {
		close(f.primed)
	} else {
		f.tail = newTail(f)
	}
	return f, nil
}

// Now is the feed's clock.
func (f *Feed) Now() time.Time { return f.now() }

// Window is how far from its arrival an image's capture may lie to be fed.
func (f *Feed) Window() time.Duration { return f.window }

// Buffer is how many events a subscription holds before it is dropped.
func (f *Feed) Buffer() int { return f.buffer }

// Publish feeds an image just created by this process. It never blocks. A
// feed with a tail ignores it: the tail finds every create, whichever
// replica made it.
func (f *Feed) Publish(img images.Image) {
	if f.poll > 0 {
		return
	}
	now := f.now()
	if !f.live(img, now) {
		return
	}
	f.publish([]images.Image{img}, now)
}

// live tells whether img, readable at now, is of the feed.
func (f *Feed) live(img images.Image, now time.Time) bool {
	return !img.CapturedAt.Before(now.Add(-f.window)) && !img.CapturedAt.After(now.Add(f.window))
}

// publish hands imgs to the subscriptions of their cameras, in order,
// stamped at (or after the last Stamp). A subscription with a full buffer
// is dropped.
func (f *Feed) publish(imgs []images.Image, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stamp := f.stamp(at)
	for _, img := range imgs {
		for sub := range f.byCamera[img.CameraID] {
			select {
			case sub.events <- Event{Image: img, Stamp: stamp}:
			default:
				f.remove(sub)
				close(sub.behind)
			}
		}
	}
}

// stamp is at, or the last Stamp if at is before it; f.mu held.
func (f *Feed) stamp(at time.Time) time.Time {
	if at.After(f.last) {
		f.last = at
	}
	return f.last
}

// watched tells whether a subscription watches camera.
func (f *Feed) watched(camera string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byCamera[camera]) > 0
}

// remove unregisters sub; f.mu held.
func (f *Feed) remove(sub *Subscription) {
	for _, camera := range sub.cameras {
		subs := f.byCamera[camera]
		delete(subs, sub)
		if len(subs) == 0 {
			delete(f.byCamera, camera)
		}
	}
	sub.cameras = nil
}

// Subscription receives the new images of its cameras.
type Subscription struct {
	feed    *Feed
	cameras []string
	events  chan Event
	behind  chan struct{}
	start   time.Time
}

// Subscribe starts receiving the new images of cameras (distinct ids). With
// a tail it first waits for the tail's first pass, or for ctx, then, between
// two passes, reads the primary rows of the index rows of cameras the tail
// passed over lately (see tail.confirm): one that has not landed yet is fed
// when it does.
func (f *Feed) Subscribe(ctx context.Context, cameras []string) (*Subscription, error) {
	select {
	case <-f.primed:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.tail != nil {
		f.tail.mu.Lock()
		defer f.tail.mu.Unlock()
		f.tail.confirm(ctx, cameras)
	}
	sub := &Subscription{feed: f, cameras: cameras, events: make(chan Event, f.buffer), behind: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, camera := range cameras {
		subs := f.byCamera[camera]
		if subs == nil {
			subs = make(map[*Subscription]struct{})
			f.byCamera[camera] = subs
		}
		subs[sub] = struct{}{}
	}
	sub.start = f.stamp(f.now())
	return sub, nil
}

// Events delivers the subscription's images, per camera in the order they
// were fed.
func (s *Subscription) Events() <-chan Event { return s.events }

// Behind is closed when the subscription was dropped because its buffer was
// full: Events then receives nothing new.
func (s *Subscription) Behind() <-chan struct{} { return s.behind }

// Start is the Stamp at which the subscription began: every event it
// receives has this Stamp or a later one.
func (s *Subscription) Start() time.Time { return s.start }

// Close stops the subscription; it may be called more than once.
func (s *Subscription) Close() {
	s.feed.mu.Lock()
	defer s.feed.mu.Unlock()
	s.feed.remove(s)
}
