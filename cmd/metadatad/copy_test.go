package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	metadatav1 "github.com/metadatad/metadatad/gen/metadata/v1"
	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/fleet"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
	"github.com/metadatad/metadatad/store/retention"
)

// TestCopyCommandRoundTrip moves a deployment from the embedded store to
// Azure Table Storage and back with `metadatad copy`: every table, purge
// history, retention policies, legal holds, the outbox of deleted images
// and the blob deleter's position included, comes back with the same keys
// and properties; a second
// copy writes nothing; and the copy lists each index table before its
// primary table; and the copy to Azure writes its camera tables, which the
// embedded store does not keep.
func TestCopyCommandRoundTrip(t *testing.T) {
	connection := azurite.Require(t)
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
	var id [4]byte
	_, _ = rand.Read(id[:])
	prefix := "c" + hex.EncodeToString(id[:])

	first := t.TempDir()
	d := startDaemon(t, first, "-retention-outbox")
	clients := newImageClients(d.conn(t))
	for seq := range 90 {
		img := written{kind: images.Kinds[seq%3], camera: fmt.Sprintf("copy-%d", seq%2), at: crashBase.Add(time.Duration(seq) * time.Minute)}
		if err := clients.create(t.Context(), img); err != nil {
			t.Fatal(err)
		}
	}
	rs := metadatav1.NewRetentionServiceClient(d.conn(t))
	// A purge, whose deletions the outbox of deleted images records.
	started, err := rs.StartPurge(t.Context(), &metadatav1.StartPurgeRequest{
		Cutoff: &metadatav1.StartPurgeRequest_CutoffTime{CutoffTime: timestamppb.New(crashBase.Add(30 * time.Minute))}})
	if err != nil {
		t.Fatal(err)
	}
	if end := watchToEnd(t, d, started.GetJob().GetJobId()); end.GetState() != metadatav1.PurgeState_PURGE_STATE_SUCCEEDED {
		t.Fatalf("the purge ended %v", end)
	}
	if _, err := rs.CreateRetentionPolicy(t.Context(), &metadatav1.CreateRetentionPolicyRequest{
		RetentionPolicy: &metadatav1.RetentionPolicy{Name: "retentionPolicies/prefixes/copy-", SingleRetentionDays: 30}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.CreateLegalHold(t.Context(), &metadatav1.CreateLegalHoldRequest{
		LegalHold: &metadatav1.LegalHold{Name: "legalHolds/copy-1", Reason: "kept through copies"}}); err != nil {
		t.Fatal(err)
	}
	stop(t, d)
	// The blob deleter's position, as it keeps it, beside the outbox.
	db, err := pebble.Open(pebble.Options{Dir: first, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	position, err := db.Table(t.Context(), blobDeleterTable)
	if err == nil {
		_, err = position.Upsert(t.Context(), store.Entity{PartitionKey: "blobs", RowKey: "deleter",
			Properties: store.Properties{"Token": "12"}}, store.Replace)
	}
	if err = errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}

	var out strings.Builder
	if err := runCopy(t.Context(), []string{"-from", "embedded:" + first, "-to", "azure", "-azure-table-prefix", prefix}, &out); err != nil {
		t.Fatalf("copy to Azure: %v\n%s", err, out.String())
	}
	t.Log(out.String())
	last := t.TempDir()
	if err := runCopy(t.Context(), []string{"-from", "azure", "-azure-table-prefix", prefix, "-to", "embedded:" + last}, &out); err != nil {
		t.Fatalf("copy back: %v", err)
	}
	out.Reset()
	if err := runCopy(t.Context(), []string{"-from", "embedded:" + first, "-to", "azure", "-azure-table-prefix", prefix}, &out); err != nil {
		t.Fatalf("second copy: %v", err)
	}
	c := config{tables: map[images.Kind]string{}}
	c.registerTables(flag.NewFlagSet("defaults", flag.ContinueOnError))()
	tables := copyTables(c)
	if got := strings.Count(out.String(), "already copied"); got != len(tables) {
		t.Errorf("second copy: %d tables already copied, want all %d:\n%s", got, len(tables), out.String())
	}
	for _, k := range images.Kinds {
		if slices.Index(tables, images.IndexTable(k.DefaultTable())) > slices.Index(tables, k.DefaultTable()) {
			t.Errorf("%s is copied before its index table", k.DefaultTable())
		}
	}

	// The policies table holds the prefix policy made and the count of
	// prefix policies its cap keeps; the holds table the hold. The outbox
	// holds a record of each of the 30 images the purge deleted (captured in
	// the first 30 minutes) and its next sequence number; the blob
	// deleter's table its position.
	wantRows := map[string]int{retention.DefaultPoliciesTable: 2, retention.DefaultHoldsTable: 1,
		retention.DefaultOutboxTable: 31, blobDeleterTable: 1}
	for name := range wantRows {
		if !slices.Contains(tables, name) {
			t.Errorf("copy leaves table %s behind", name)
		}
	}
	want, got := openQuiet(t, first), openQuiet(t, last)
	requireCameraTables(t, want, connection, prefix)
	for _, name := range tables {
		w, g := scanAll(t, want, name), scanAll(t, got, name)
		if !slices.EqualFunc(w, g, func(a, b store.Entity) bool {
			return a.PartitionKey == b.PartitionKey && a.RowKey == b.RowKey && store.EqualProperties(a.Properties, b.Properties)
		}) {
			t.Errorf("table %s: %d rows after the round trip, %d before, or they differ", name, len(g), len(w))
		}
		if strings.HasPrefix(name, "PurgeJobs") && len(w) == 0 {
			t.Error("no purge history to copy")
		}
		if n, ok := wantRows[name]; ok && len(w) != n {
			t.Errorf("table %s: %d rows to copy, want the %d the policy, hold, purge or deleter made", name, len(w), n)
		}
	}
}

func openQuiet(t *testing.T, dir string) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(pebble.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// requireCameraTables fails unless the camera tables of the Azure store
// at prefix list the cameras of the embedded store src, each kind's, with
// the same first and latest captures.
func requireCameraTables(t *testing.T, src *pebble.DB, connection, prefix string) {
	t.Helper()
	azure, err := aztable.Open(t.Context(), aztable.Options{ConnectionString: connection, TablePrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range images.Kinds {
		repo, err := images.Open(t.Context(), src, images.Options{Kind: k})
		if err != nil {
			t.Fatal(err)
		}
		cameras, err := fleet.OpenCameraTable(t.Context(), azure, k.DefaultTable())
		if err != nil {
			t.Fatal(err)
		}
		var lists [2][]fleet.Camera
		for i, opts := range []fleet.Options{{Repo: repo, Embedded: src}, {Repo: repo, Cameras: cameras}} {
			view, err := fleet.Open(opts)
			if err == nil {
				lists[i], _, err = view.Cameras(t.Context(), fleet.CameraQuery{Limit: 100})
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if len(lists[0]) != 2 || !slices.EqualFunc(lists[0], lists[1], func(a, b fleet.Camera) bool {
			return a.ID == b.ID && a.First.Equal(b.First) && a.Latest.Equal(b.Latest)
		}) {
			t.Errorf("%s: Azure's camera table lists %v, the embedded store %v (two cameras)", k.DefaultTable(), lists[1], lists[0])
		}
	}
}
