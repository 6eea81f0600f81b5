package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store/images"
)

// TestBackupAndRestoreCommands backs up a running daemon through
// AdminService.Backup (`metadatad backup -server`) while 8 writers create
// images of all three types, restores the backup into a new directory, and
// starts a daemon on it: every create acknowledged before the backup
// started is served, and each primary row has its index row. Around it: an
// offline backup is refused while the daemon holds the store, and taken
// once it has stopped; a restore into a directory that is no longer empty
// is refused.
func TestBackupAndRestoreCommands(t *testing.T) {
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	clients := newImageClients(d.conn(t))
	var started atomic.Bool
	before := make([][]written, crashWriters)
	var total atomic.Int64
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for w := range crashWriters {
		wg.Go(func() {
			for seq := 0; ctx.Err() == nil; seq++ {
				img := written{kind: images.Kinds[seq%len(images.Kinds)], camera: fmt.Sprintf("backup-w%d", w),
					at: crashBase.Add(time.Duration(seq) * time.Second)}
				if err := clients.create(ctx, img); err != nil {
					if ctx.Err() == nil {
						t.Errorf("create: %v", err)
					}
					return
				}
				total.Add(1)
				if !started.Load() { // acknowledged before the backup started
					before[w] = append(before[w], img)
				}
			}
		})
	}
	for total.Load() < 300 {
		time.Sleep(time.Millisecond)
	}
	online := filepath.Join(t.TempDir(), "online")
	started.Store(true)
	err := runBackup(t.Context(), []string{"-server", d.addr, "-to", online}, io.Discard)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatalf("backup -server: %v", err)
	}

	err = runBackup(t.Context(), []string{"-data-dir", dataDir, "-to", filepath.Join(t.TempDir(), "refused")}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-server") {
		t.Errorf("offline backup of a served store: %v, want a refusal pointing to -server", err)
	}
	stop(t, d)
	var report strings.Builder
	if err := runBackup(t.Context(), []string{"-data-dir", dataDir, "-to", filepath.Join(t.TempDir(), "offline")}, &report); err != nil {
		t.Fatalf("backup -data-dir of a stopped store: %v", err)
	}
	t.Log(strings.TrimSpace(report.String()))

	restored := filepath.Join(t.TempDir(), "restored")
	if err := runRestore(t.Context(), []string{"-from", online, "-data-dir", restored}, io.Discard); err != nil {
		t.Fatalf("restore: %v", err)
	}
	err = runRestore(t.Context(), []string{"-from", online, "-data-dir", restored}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("restore into a restored directory: %v, want a refusal", err)
	}

	d = startDaemon(t, restored)
	clients = newImageClients(d.conn(t))
	acked := 0
	for w := range crashWriters {
		byKind := map[images.Kind][]time.Time{}
		for _, img := range before[w] {
			byKind[img.kind] = append(byKind[img.kind], img.at)
		}
		for kind, want := range byKind {
			got := clients.captured(t, kind, fmt.Sprintf("backup-w%d", w))
			for _, at := range want {
				if !slices.ContainsFunc(got, at.Equal) {
					t.Fatalf("%s image of backup-w%d at %v, acknowledged before the backup, is not in the restore", kind, w, at)
				}
			}
			acked += len(want)
		}
	}
	stop(t, d)
	requireIndexMatchesPrimary(t, restored, time.Time{})
	t.Logf("%d creates acknowledged before the backup, all restored; %d in all", acked, total.Load())
}
