package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
)

// fleetViews are the fleet views of each image kind and the loops that
// keep them: on Azure the recorders of the camera tables (none on the
// embedded store, whose views read its tallies), and the silence count.
type fleetViews struct {
	views     map[images.Kind]*fleet.View
	recorders []*fleet.Recorder
	silence   *fleet.Silence
}

// cameraTable is an image kind's camera table on Azure and the recorder
// that writes it, which the kind's repository tells of every create.
type cameraTable struct {
	table    store.Table
	recorder *fleet.Recorder
}

// openCameraTable is kind's camera table on Azure; nil on the embedded
// store, whose views read its tallies.
func openCameraTable(ctx context.Context, cfg config, store backend, kind images.Kind, log *slog.Logger) (*cameraTable, error) {
	if store.embedded != nil {
		return nil, nil
	}
	table, err := fleet.OpenCameraTable(ctx, store.tables, tableName(cfg, kind))
	if err != nil {
		return nil, err
	}
	rec, err := fleet.NewRecorder(fleet.RecorderOptions{Table: table, Interval: cfg.fleetInterval, Logger: log})
	if err != nil {
		return nil, err
	}
	return &cameraTable{table: table, recorder: rec}, nil
}

// tableName is the kind's primary table as -table flags name it.
func tableName(cfg config, kind images.Kind) string {
	if name := cfg.tables[kind]; name != "" {
		return name
	}
	return kind.DefaultTable()
}

// openFleet opens the views over the repositories and, on Azure, the
// camera tables openCameraTable opened (keyed by kind).
func openFleet(cfg config, store backend, repos map[images.Kind]*images.Repository, cameras map[images.Kind]*cameraTable,
	log *slog.Logger) (*fleetViews, error) {
	f := &fleetViews{views: map[images.Kind]*fleet.View{}}
	for _, kind := range images.Kinds {
		opts := fleet.Options{Repo: repos[kind]}
		if store.embedded != nil {
			opts.Embedded = store.embedded
		} else {
			opts.Cameras = cameras[kind].table
			f.recorders = append(f.recorders, cameras[kind].recorder)
		}
		view, err := fleet.Open(opts)
		if err != nil {
			return nil, err
		}
		f.views[kind] = view
	}
	f.silence = fleet.NewSilence(fleet.SilenceOptions{Views: []*fleet.View{f.views[images.Single], f.views[images.Pano], f.views[images.PreStitch]},
		SilentFor: cfg.fleetSilentAfter, LookBack: cfg.fleetLookBack, Logger: log})
	return f, nil
}

// start runs the loops until the returned stop is called; stop waits for them.
func (f *fleetViews) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.silence.Run(ctx) })
	for _, r := range f.recorders {
		wg.Go(func() { r.Run(ctx) })
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// silentCounts are the last silence counts by image type, for the metric.
func (f *fleetViews) silentCounts() map[string]int {
	out := map[string]int{}
	for kind, n := range f.silence.Counts() {
		out[kind.String()] = n
	}
	return out
}
