package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/metadatad/metadatad/store"
)

// writers is how many goroutines race in the concurrency tests.
const writers = 8

// race runs write(i) for i in [0, writers) on as many goroutines, released
// together so that their writes overlap, and returns each one's error.
func race(write func(i int) error) []error {
	errs := make([]error, writers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			<-start
			errs[i] = write(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// wantOneWinner checks that exactly one racing write succeeded and that the
// others failed with lost, and returns the winner.
func wantOneWinner(t *testing.T, what string, errs []error, lost error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("%s: writers %d and %d both succeeded", what, winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, lost):
			t.Errorf("%s: writer %d: error %v, want one wrapping %v", what, i, err, lost)
		}
	}
	if winner < 0 {
		t.Fatalf("%s: no writer succeeded", what)
	}
	return winner
}

func testConcurrency(t *testing.T, h Harness) {
	t.Run("InsertSameKey", func(t *testing.T) {
		tbl := newTable(t, h)
		k := key{"cam1", "r1"}
		errs := race(func(i int) error {
			_, err := tbl.Insert(t.Context(), entity(k, store.Properties{"Writer": int32(i)}))
			return err
		})
		winner := wantOneWinner(t, "Insert", errs, store.ErrAlreadyExists)
		wantProps(t, "Get", mustGet(t, tbl, k).Properties, store.Properties{"Writer": int32(winner)})
	})

	t.Run("InsertDistinctKeys", func(t *testing.T) {
		tbl := newTable(t, h)
		want := make([]key, writers)
		for i := range want {
			want[i] = key{"cam1", fmt.Sprintf("r%d", i)}
		}
		errs := race(func(i int) error {
			_, err := tbl.Insert(t.Context(), entity(want[i], nil))
			return err
		})
		for i, err := range errs {
			if err != nil {
				t.Errorf("Insert %s: %v", want[i], err)
			}
		}
		wantKeys(t, "Query", queryAll(t, tbl, store.Query{PartitionKey: "cam1"}), want)
	})

	t.Run("UpdateSameETag", func(t *testing.T) {
		// Optimistic concurrency: of the writers that read the same version,
		// one wins and the others learn that they lost.
		tbl := newTable(t, h)
		k := key{"cam1", "r1"}
		read := mustInsert(t, tbl, entity(k, store.Properties{"Writer": int32(-1)}))
		errs := race(func(i int) error {
			_, err := tbl.Update(t.Context(), entity(k, store.Properties{"Writer": int32(i)}), store.Replace, read.ETag)
			return err
		})
		winner := wantOneWinner(t, "Update", errs, store.ErrConflict)
		wantProps(t, "Get", mustGet(t, tbl, k).Properties, store.Properties{"Writer": int32(winner)})
	})
}
