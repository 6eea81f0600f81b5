package pebble_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/metadatad/metadatad/store/pebble"
)

// listing names dir's entries and their sizes, to see that nothing was
// written.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(e.Name(), info.Size(), info.ModTime()))
	}
	return out
}

// TestOpenRefusesUnfinished: a directory holding the marker of a restore
// or copy is refused before anything is read or written, with the command
// to rerun; only the command that left the marker (or any resuming one,
// for a marker cut short) opens it.
func TestOpenRefusesUnfinished(t *testing.T) {
	restore := pebble.Unfinished{Command: "restore", Args: []string{"metadatad", "restore", "-from", "/b", "-data-dir", "/d"}}
	copyMark := pebble.Unfinished{Command: "copy", Args: []string{"metadatad", "copy", "-from", "embedded:/a b", "-to", "embedded:/it's"}}
	for _, tc := range []struct {
		name string
		// marker is written into the directory; nil writes an empty file.
		marker *pebble.Unfinished
		allow  string
		// store makes the directory a store before the marker.
		store bool
		want  string // "" opens
	}{
		{name: "restore refused", marker: &restore, want: "holds a restore that did not finish: run `metadatad restore -from /b -data-dir /d` again"},
		{name: "copy into a store refused", marker: &copyMark, store: true, want: `holds a copy that did not finish: run ` + "`" + `metadatad copy -from 'embedded:/a b' -to 'embedded:/it'\''s'` + "` again"},
		{name: "unreadable refused", want: "marker METADATAD-UNFINISHED is unreadable"},
		{name: "restore's refused to copy", marker: &restore, allow: "copy", want: "holds a restore that did not finish"},
		{name: "copy's opened by copy", marker: &copyMark, allow: "copy", store: true},
		{name: "copy's opened by copy before any store file", marker: &copyMark, allow: "copy"},
		{name: "unreadable opened by copy", allow: "copy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.store {
				db, err := pebble.Open(pebble.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.marker != nil {
				if err := pebble.MarkUnfinished(dir, *tc.marker); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(filepath.Join(dir, pebble.UnfinishedName), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			before := listing(t, dir)
			db, err := pebble.Open(pebble.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler), AllowUnfinished: tc.allow})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				db.Close()
				t.Fatal("open succeeded")
			}
			if !errors.Is(err, pebble.ErrUnfinished) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), dir) {
				t.Errorf("open: %v, want ErrUnfinished naming %s and saying %q", err, dir, tc.want)
			}
			if after := listing(t, dir); !slices.Equal(before, after) {
				t.Errorf("the refused open changed the directory: %v, then %v", before, after)
			}
		})
	}
}

// TestMarkUnfinished: a marker can be replaced by one of the same command
// and removed; one of another command is left alone; a store whose marker
// is removed opens.
func TestMarkUnfinished(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	first := pebble.Unfinished{Command: "copy", Args: []string{"metadatad", "copy", "-from", "azure", "-to", "embedded:" + dir}}
	if err := pebble.MarkUnfinished(dir, first); err != nil {
		t.Fatalf("mark a missing directory: %v", err)
	}
	second := pebble.Unfinished{Command: "copy", Args: []string{"metadatad", "copy", "-from", "embedded:/x", "-to", "embedded:" + dir}}
	if err := pebble.MarkUnfinished(dir, second); err != nil {
		t.Fatalf("mark again: %v", err)
	}
	if got, found, err := pebble.ReadUnfinished(dir); err != nil || !found || !slices.Equal(got.Args, second.Args) || got.Command != second.Command {
		t.Errorf("marker %+v, %v, %v; want %+v", got, found, err, second)
	}
	// A rerun's replacement goes in beside the marker and is renamed over
	// it: one killed half way leaves the marker whole, as here.
	if _, err := os.Stat(filepath.Join(dir, pebble.UnfinishedName+".new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a replaced marker left its replacement behind: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, pebble.UnfinishedName+".new"), []byte(`{"comm`), 0o640); err != nil {
		t.Fatal(err)
	}
	if got, _, err := pebble.ReadUnfinished(dir); err != nil || !slices.Equal(got.Args, second.Args) {
		t.Errorf("marker %+v (%v) beside a replacement cut short; want %+v", got, err, second)
	}
	err := pebble.MarkUnfinished(dir, pebble.Unfinished{Command: "restore", Args: []string{"metadatad", "restore"}})
	if !errors.Is(err, pebble.ErrUnfinished) || !strings.Contains(err.Error(), second.Rerun()) {
		t.Errorf("a restore's mark over a copy's: %v, want ErrUnfinished quoting the copy", err)
	}
	if err := pebble.MarkFinished(dir); err != nil {
		t.Fatal(err)
	}
	if err := pebble.MarkFinished(dir); err != nil {
		t.Errorf("finish twice: %v", err)
	}
	if _, found, err := pebble.ReadUnfinished(dir); err != nil || found {
		t.Errorf("marker found %v (%v) after MarkFinished", found, err)
	}
	if _, err := os.Stat(filepath.Join(dir, pebble.UnfinishedName+".new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("MarkFinished left a replacement cut short: %v", err)
	}
	db, err := pebble.Open(pebble.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open once finished: %v", err)
	}
	db.Close()
}
