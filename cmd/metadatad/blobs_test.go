package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

// TestBlobsAuditFindsOrphansAndMissingBlobs, on Azurite's blob service:
// the audit lists the blobs under the prefix no image row names and the
// rows under it whose blob is missing, with their counts, and nothing else,
// of an embedded store and of Azure tables.
func TestBlobsAuditFindsOrphansAndMissingBlobs(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		dir := t.TempDir()
		db, err := pebble.Open(pebble.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		testBlobsAudit(t, db, db.Close, "-data-dir", dir)
	})
	t.Run("azure", func(t *testing.T) {
		conn := azurite.Require(t)
		t.Setenv("METADATAD_AZURE_CONNECTION_STRING", conn)
		var id [4]byte
		_, _ = rand.Read(id[:])
		prefix := "t" + hex.EncodeToString(id[:])
		tables, err := aztable.Open(t.Context(), aztable.Options{ConnectionString: conn, TablePrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		testBlobsAudit(t, tables, func() error { return nil }, "-store", "azure", "-azure-table-prefix", prefix)
	})
}

// testBlobsAudit seeds tables, closes them and audits them with the flags
// that name them.
func testBlobsAudit(t *testing.T, tables store.Backend, closeTables func() error, storeFlags ...string) {
	conn := azurite.RequireBlob(t)
	t.Setenv(envBlobConnectionString, conn)
	client, err := azblob.NewClientFromConnectionString(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var id [4]byte
	_, _ = rand.Read(id[:])
	cont := "audit" + hex.EncodeToString(id[:])
	if _, err := client.CreateContainer(ctx, cont, nil); err != nil {
		t.Fatal(err)
	}
	containerURL := strings.TrimSuffix(client.URL(), "/") + "/" + cont
	for _, name := range []string{"site-a/cam-1/1.jpg", "site-a/cam-1/orphan.jpg", "site-b/cam-9/other.jpg"} {
		if _, err := client.UploadBuffer(ctx, cont, name, []byte("jpeg"), nil); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for kind, uris := range map[images.Kind][]string{
		images.Single: {containerURL + "/site-a/cam-1/1.jpg", containerURL + "/site-a/cam-1/2.jpg"}, // 2 is missing
		images.Pano:   {containerURL + "/site-b/cam-9/gone.jpg", "https://elsewhere.example/x.jpg"}, // outside the prefix
	} {
		repo, err := images.Open(ctx, tables, images.Options{Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		for i, uri := range uris {
			if _, err := repo.Create(ctx, images.Image{CameraID: "cam-1", CapturedAt: at.Add(time.Duration(i) * time.Minute), BlobURI: uri}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := closeTables(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := runBlobs(ctx, append([]string{"audit", "-container", containerURL, "-prefix", "site-a/"}, storeFlags...), &out); err != nil {
		t.Fatalf("audit: %v\n%s", err, &out)
	}
	got := out.String()
	for _, want := range []string{
		"orphan " + containerURL + "/site-a/cam-1/orphan.jpg\n",
		"missing " + containerURL + "/site-a/cam-1/2.jpg (single cam-1 ",
		"2 blobs under " + containerURL + "/site-a/: 1 named by no image row; 1 image rows whose blob is missing\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the audit's output lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "\n") != 3 {
		t.Errorf("the audit printed more than the orphan, the missing blob and the counts:\n%s", got)
	}
	if err := runBlobs(ctx, append([]string{"audit"}, storeFlags...), &out); err == nil {
		t.Error("an audit without -container ran")
	}
}
