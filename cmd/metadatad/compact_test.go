package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
)

// TestCompactCommand compacts the store of a stopped daemon: refused while
// the daemon holds it, or when the directory does not exist; afterwards
// the daemon serves every image it had.
func TestCompactCommand(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	clients := newImageClients(d.conn(t))
	var want []time.Time
	for i := range 50 {
		img := written{kind: images.Single, camera: "compact-cam", at: crashBase.Add(time.Duration(i) * time.Minute)}
		if err := clients.create(t.Context(), img); err != nil {
			t.Fatal(err)
		}
		want = append(want, img.at)
	}
	err := runCompact(t.Context(), []string{"-data-dir", dataDir}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "stop the metadatad") {
		t.Errorf("compact of a served store: %v, want a refusal asking to stop the server", err)
	}
	stop(t, d)
	if err := runCompact(t.Context(), []string{"-data-dir", filepath.Join(dataDir, "missing")}, io.Discard); err == nil {
		t.Error("compact of a missing directory succeeded; it would have created a store there")
	}
	var report strings.Builder
	if err := runCompact(t.Context(), []string{"-data-dir", dataDir}, &report); err != nil {
		t.Fatalf("compact of a stopped store: %v", err)
	}
	if !strings.HasPrefix(report.String(), "compacted "+dataDir) {
		t.Errorf("compact reported %q", report.String())
	}
	d = startDaemon(t, dataDir)
	got := newImageClients(d.conn(t)).captured(t, images.Single, "compact-cam")
	if len(got) != len(want) {
		t.Fatalf("%d images served after the compaction, want %d", len(got), len(want))
	}
	stop(t, d)
}
