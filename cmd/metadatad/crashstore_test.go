package main

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"github.com/metadatad/metadatad/internal/azurite"
	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/aztable"
	"github.com/metadatad/metadatad/store/images"
	"github.com/metadatad/metadatad/store/pebble"
)

// crashStore is where the daemons of a crash test keep their rows: the
// embedded store in a folder, or tables of their own on Azurite.
type crashStore struct {
	name    string
	dataDir string
	// azurePrefix, on Azure, is the prefix of the test's own tables.
	azurePrefix string
	// cycles scales a test's kill cycles: Azurite is the slower path.
	cycles func(int) int
	// indexFirst is true where a create writes its index row, then its
	// primary row, without a transaction: a create cut off between the two
	// leaves an index row alone (never a primary row alone).
	indexFirst bool
}

// crashStores are the embedded store and Azure Table Storage on Azurite.
func crashStores(t *testing.T) []crashStore {
	var id [4]byte
	_, _ = rand.Read(id[:])
	return []crashStore{embeddedStore(t.TempDir()), {
		name: "azure", dataDir: t.TempDir(), azurePrefix: "k" + hex.EncodeToString(id[:]), indexFirst: true,
		cycles: func(n int) int { return max(1, n/4) },
	}}
}

// embeddedStore is the embedded store in dataDir.
func embeddedStore(dataDir string) crashStore {
	return crashStore{name: "embedded", dataDir: dataDir, cycles: func(n int) int { return n }}
}

// start starts a daemon on the store; on Azure it skips (fails under
// CI=true) without Azurite.
func (s crashStore) start(t *testing.T, args ...string) *daemon {
	t.Helper()
	if s.azurePrefix != "" {
		t.Setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.Require(t))
		args = append([]string{"-store", "azure", "-azure-table-prefix", s.azurePrefix}, args...)
	}
	return startDaemon(t, s.dataDir, args...)
}

// open opens the rows as the stopped daemons left them.
func (s crashStore) open(t *testing.T) store.Backend {
	t.Helper()
	if s.azurePrefix != "" {
		b, err := aztable.Open(t.Context(), aztable.Options{
			ConnectionString: azurite.Require(t), TablePrefix: s.azurePrefix, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	db, err := pebble.Open(pebble.Options{Dir: s.dataDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// requireIndexMatchesPrimary checks the rows the stopped daemons left, for
// each image type: every primary row has its index row in the partition
// of its capture minute, and, unless creates write the index first without
// a transaction, every index row its primary row; and no row of either
// table is older than notBefore.
func (s crashStore) requireIndexMatchesPrimary(t *testing.T, notBefore time.Time) {
	t.Helper()
	db := s.open(t)
	for _, kind := range images.Kinds {
		primary := map[string]bool{}
		for _, e := range scanAll(t, db, kind.DefaultTable()) {
			at, err := store.TimeFromInvertedTicksRowKey(e.RowKey)
			if err != nil {
				t.Fatalf("%s row %s/%s: %v", kind, e.PartitionKey, e.RowKey, err)
			}
			if at.Before(notBefore) {
				t.Errorf("%s row of %s at %v survived a purge before %v", kind, e.PartitionKey, at, notBefore)
			}
			primary[store.MinutePartitionKey(at)+"/"+e.RowKey+"_"+e.PartitionKey] = true
		}
		index, alone := map[string]bool{}, 0
		for _, e := range scanAll(t, db, images.IndexTable(kind.DefaultTable())) {
			index[e.PartitionKey+"/"+e.RowKey] = true
			if !primary[e.PartitionKey+"/"+e.RowKey] {
				alone++
				if !s.indexFirst {
					t.Errorf("%s index row %s/%s has no primary row", kind, e.PartitionKey, e.RowKey)
				}
			}
		}
		for key := range primary {
			if !index[key] {
				t.Errorf("%s primary row %s has no index row", kind, key)
			}
		}
		if len(primary) == 0 {
			t.Errorf("no %s rows at all", kind)
		}
		t.Logf("%s: %d primary rows, %d index rows (%d of a create cut off)", kind, len(primary), len(index), alone)
	}
}

func scanAll(t *testing.T, db store.Backend, table string) []store.Entity {
	t.Helper()
	tbl, err := db.Table(t.Context(), table)
	if err != nil {
		t.Fatal(err)
	}
	var all []store.Entity
	scan := store.Scan{}
	for {
		page, err := tbl.Scan(t.Context(), scan)
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		all = append(all, page.Entities...)
		if page.Next == nil {
			return all
		}
		scan.Resume = page.Next
	}
}
