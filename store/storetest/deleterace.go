package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// deleteRaceRounds is how many times each fast-path delete races an
// Update of the row it deletes; the window it hunts is a few microseconds.
const deleteRaceRounds = 200

// testDeletesAgainstUpdates races DeleteRanges and DeleteKeys against an
// Update of the row they delete. Update writes only over a stored row, so
// whichever goes first the row is gone at the end: the update either went
// first and was deleted, or came second and found nothing (ErrNotFound). A
// backend whose fast-path deletes skip the locks that hold an Update's
// check and write together lets the Update resurrect the row.
func testDeletesAgainstUpdates(t *testing.T, h Harness) {
	tbl := newTable(t, h)
	deletes := map[string]func(k key) error{}
	if rd, ok := tbl.(store.RangeDeleter); ok {
		deletes["DeleteRanges"] = func(k key) error {
			_, err := rd.DeleteRanges(t.Context(), []store.RowRange{{PartitionKey: k.PartitionKey}})
			return err
		}
	}
	if kd, ok := tbl.(store.KeyDeleter); ok {
		deletes["DeleteKeys"] = func(k key) error {
			return kd.DeleteKeys(t.Context(), []store.KeyDelete{{Key: store.Key{PartitionKey: k.PartitionKey, RowKey: k.RowKey}}})
		}
	}
	if len(deletes) == 0 {
		t.Skipf("table %T has no fast-path deletes", tbl)
	}
	for name, del := range deletes {
		for mode, modeName := range map[store.WriteMode]string{store.Merge: "Merge", store.Replace: "Replace"} {
			t.Run(name+"/"+modeName, func(t *testing.T) {
				for round := range deleteRaceRounds {
					k := key{fmt.Sprintf("%s-%s-%03d", name, modeName, round), "r1"}
					mustInsert(t, tbl, entity(k, store.Properties{"Round": int32(round)}))
					var updateErr, deleteErr error
					var wg sync.WaitGroup
					start := make(chan struct{})
					wg.Go(func() {
						<-start
						_, updateErr = tbl.Update(t.Context(), entity(k, store.Properties{"Updated": true}), mode, "*")
					})
					wg.Go(func() {
						<-start
						deleteErr = del(k)
					})
					close(start)
					wg.Wait()
					if deleteErr != nil {
						t.Fatalf("round %d: %s: %v", round, name, deleteErr)
					}
					if updateErr != nil && !errors.Is(updateErr, store.ErrNotFound) {
						t.Fatalf("round %d: Update: %v, want success or an error wrapping %v", round, updateErr, store.ErrNotFound)
					}
					if e, err := tbl.Get(t.Context(), k.PartitionKey, k.RowKey); !errors.Is(err, store.ErrNotFound) {
						t.Fatalf("round %d: after %s and a concurrent Update, Get = %v, %v; want %v: the Update wrote over a deleted row",
							round, name, e.Properties, err, store.ErrNotFound)
					}
				}
			})
		}
	}
}
