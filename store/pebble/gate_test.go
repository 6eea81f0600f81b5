package pebble_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/pebble"
)

// TestAnExclusiveWaitsOutWritesWithoutHoldingUpNewOnes: an Exclusive
// waits for the writes in flight when it began (they passed no horizon),
// and sees them; while it waits, a write that passes its horizon (a
// camera's new image) commits at once rather than queueing behind the
// in-flight one's commit, as it did behind a lock the Exclusive waited for.
func TestAnExclusiveWaitsOutWritesWithoutHoldingUpNewOnes(t *testing.T) {
	db, images := openTallied(t)
	ctx := t.Context()
	old := store.Entity{PartitionKey: "cam0", RowKey: store.InvertedTicksRowKey(day0.Add(time.Minute))}
	unlock := pebble.HoldRow(db, images.Name(), old.PartitionKey, old.RowKey)
	inFlight := make(chan error, 1)
	go func() { _, err := images.Insert(ctx, old); inFlight <- err }()
	for pebble.WritesInFlight(db) == 0 {
		time.Sleep(time.Millisecond)
	}

	staged := make(chan error, 1)
	go func() {
		staged <- db.Exclusive(ctx, day0.Add(12*time.Hour), func(ctx context.Context, b store.PurgeBatch) error {
			tallies, err := dayTallies(ctx, b, images, "cam0", day0.Add(time.Hour))
			if err != nil || len(tallies) != 1 || tallies[0].Total() != 1 {
				return fmt.Errorf("the stage did not see the write it waited for: %v, %v", tallies, err)
			}
			return nil
		})
	}()
	for pebble.WritesInFlight(db) != 0 { // the Exclusive's own epoch has begun
		time.Sleep(time.Millisecond)
	}
	young := store.Entity{PartitionKey: "cam1", RowKey: store.InvertedTicksRowKey(day0.Add(36 * time.Hour))}
	passed := make(chan error, 1)
	go func() { _, err := images.Insert(ctx, young); passed <- err }()
	select {
	case err := <-passed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write of a later day waited for the write the Exclusive waits for")
	}
	select {
	case err := <-staged:
		t.Fatalf("the Exclusive ran before the write in flight committed: %v", err)
	default:
	}
	unlock()
	if err := <-inFlight; err != nil {
		t.Fatal(err)
	}
	if err := <-staged; err != nil {
		t.Fatal(err)
	}
	checkTally(t, db, images)
}
