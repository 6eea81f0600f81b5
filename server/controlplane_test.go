package server_test

import (
	"sync"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/acquisition"
	"github.com/metadatad/metadatad/store/devices"
	"github.com/metadatad/metadatad/store/video"
)

// controlPlaneTables are the tables of the video, device state and
// acquisition instance repositories, by their default names.
var controlPlaneTables = []string{
	video.DefaultTable, devices.DefaultTable,
	acquisition.DefaultTable, acquisition.ActiveTable(acquisition.DefaultTable),
}

// testClock is a clock that moves only when a test moves it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// controlPlane holds the repositories of the control plane's services.
type controlPlane struct {
	video       *video.Repository
	devices     *devices.Repository
	acquisition *acquisition.Repository
}

// openControlPlane opens the control plane's repositories on backend, with
// clock as their clock.
func openControlPlane(t testing.TB, backend store.Backend, clock *testClock) controlPlane {
	t.Helper()
	var c controlPlane
	var err error
	if c.video, err = video.Open(t.Context(), backend, video.Options{}); err != nil {
		t.Fatalf("open video repository: %v", err)
	}
	if c.devices, err = devices.Open(t.Context(), backend, devices.Options{Now: clock.Now}); err != nil {
		t.Fatalf("open device state repository: %v", err)
	}
	if c.acquisition, err = acquisition.Open(t.Context(), backend, acquisition.Options{Now: clock.Now}); err != nil {
		t.Fatalf("open acquisition repository: %v", err)
	}
	return c
}
