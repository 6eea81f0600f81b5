package watchfeed

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

// DefaultMaxResumeAge is the default of Options.MaxResumeAge: the hour the
// API documents for resume tokens.
const DefaultMaxResumeAge = time.Hour

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
	// MaxResumeAge is how old a Stamp callers may give Since; 0 means
	// DefaultMaxResumeAge. Since reads the caller's cameras' images from the
	// Stamp on, so this bounds what one resume costs.
	MaxResumeAge time.Duration
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
	resume time.Duration
	now    func() time.Time
	log    *slog.Logger
	// tail, with Options.Poll, finds the new images; nil without.
	tail *tail

	// mu guards the subscriptions, the Stamps and the tail's cameras. It is
	// never held across a store read.
	mu sync.Mutex
	// last is the latest Stamp given, so Stamps never go back.
	last time.Time
	// subs holds the subscriptions of each watched camera.
	subs map[string]map[*Subscription]struct{}
}

// New makes a feed; with Options.Poll its tail runs in Run.
func New(opts Options) (*Feed, error) {
	if opts.Repo == nil {
		return nil, errors.New("watchfeed: Options needs the Repo")
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Poll > 0 && opts.Window <= opts.Repo.IndexLag() {
		return nil, fmt.Errorf("watchfeed: Window %s must exceed the index lag %s: a primary row may land that long after its index row", opts.Window, opts.Repo.IndexLag())
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.MaxResumeAge <= 0 {
		opts.MaxResumeAge = DefaultMaxResumeAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &Feed{repo: opts.Repo, poll: opts.Poll, window: opts.Window, buffer: opts.Buffer, resume: opts.MaxResumeAge,
		now: opts.Now, log: opts.Logger, subs: make(map[string]map[*Subscription]struct{})}
	if f.poll > 0 {
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

// MaxResumeAge is how old a Stamp callers may give Since.
func (f *Feed) MaxResumeAge() time.Duration { return f.resume }

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
	f.mu.Lock()
	defer f.mu.Unlock()
	f.publishLocked([]images.Image{img}, now)
}

// live tells whether img, readable at now, is of the feed.
func (f *Feed) live(img images.Image, now time.Time) bool {
	return !img.CapturedAt.Before(now.Add(-f.window)) && !img.CapturedAt.After(now.Add(f.window))
}

// publishLocked hands imgs to the subscriptions of their cameras, in
// order, stamped at (or after the last Stamp); f.mu held. A subscription
// with a full buffer is dropped.
func (f *Feed) publishLocked(imgs []images.Image, at time.Time) {
	stamp := f.stamp(at)
	for _, img := range imgs {
		for sub := range f.subs[img.CameraID] {
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

// remove unregisters sub; f.mu held. The tail forgets a camera no
// subscription watches any more.
func (f *Feed) remove(sub *Subscription) {
	for _, camera := range sub.cameras {
		subs := f.subs[camera]
		delete(subs, sub)
		if len(subs) == 0 {
			delete(f.subs, camera)
			if f.tail != nil {
				delete(f.tail.cameras, camera)
			}
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

// Subscribe starts receiving the new images of cameras (distinct ids).
// With a tail it first reads, outside the feed's lock, what exists within
// the window of each camera the tail does not watch yet: those images were
// readable before the subscription began and are not fed to it; any other
// image of its cameras the tail finds from then on is.
func (f *Feed) Subscribe(ctx context.Context, cameras []string) (*Subscription, error) {
	read := make(map[string]*cameraState)
	for {
		f.mu.Lock()
		var unread []string
		if f.tail != nil {
			for _, camera := range cameras {
				if f.tail.cameras[camera] == nil && read[camera] == nil {
					unread = append(unread, camera)
				}
			}
		}
		if len(unread) == 0 {
			sub := f.subscribeLocked(cameras, read)
			f.mu.Unlock()
			return sub, nil
		}
		now := f.now()
		f.mu.Unlock()
		// A camera read here may be watched (and read) by another
		// subscription meanwhile, or its last one closed: the loop settles it.
		states := make([]*cameraState, len(unread))
		if err := inParallel(ctx, len(unread), func(ctx context.Context, i int) error {
			var err error
			states[i], err = f.tail.readCamera(ctx, unread[i], now)
			return err
		}); err != nil {
			return nil, err
		}
		for i, camera := range unread {
			read[camera] = states[i]
		}
	}
}

// subscribeLocked registers a subscription of cameras, f.mu held, with the
// states read of the cameras the tail does not watch yet.
func (f *Feed) subscribeLocked(cameras []string, read map[string]*cameraState) *Subscription {
	sub := &Subscription{feed: f, cameras: cameras, events: make(chan Event, f.buffer), behind: make(chan struct{})}
	for _, camera := range cameras {
		if f.tail != nil && f.tail.cameras[camera] == nil {
			f.tail.cameras[camera] = read[camera]
		}
		subs := f.subs[camera]
		if subs == nil {
			subs = make(map[*Subscription]struct{})
			f.subs[camera] = subs
		}
		subs[sub] = struct{}{}
	}
	sub.start = f.stamp(f.now())
	return sub
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
