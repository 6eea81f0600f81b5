package retention

import (
	"context"

	"github.com/metadatad/metadatad/store"
)

// holdSet is every camera on legal hold, read whole. A hold is absolute:
// no purge, thinning pass or storage budget deletes anything of a held
// camera, whatever its retention says. Holds are few (a case's cameras,
// not a fleet), so a purge reads them all at its start and again before
// each section or task, and checks each camera in memory: the cost of
// checking follows the holds, never the cameras.
type holdSet map[string]struct{}

// holdSet reads the holds as they stand.
func (p *Policies) holdSet(ctx context.Context) (holdSet, error) {
	set := holdSet{}
	q := store.Query{PartitionKey: holdsPart}
	for {
		page, err := p.holds.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entities {
			set[e.RowKey] = struct{}{}
		}
		if page.Next == nil {
			return set, nil
		}
		q.Resume = page.Next
	}
}

// has reports whether the camera is on legal hold.
func (h holdSet) has(camera string) bool {
	_, ok := h[camera]
	return ok
}
