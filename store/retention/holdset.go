package retention

import (
	"context"

	"github.com/metadatad/metadatad/store"
	"github.com/metadatad/metadatad/store/retention/policy"
)

// holdSet reads the holds as they stand, whole (see policy.HoldSet for
// why a purge reads them all rather than a camera's at a time).
func (p *Policies) holdSet(ctx context.Context) (policy.HoldSet, error) {
	set := policy.HoldSet{}
	q := store.Query{PartitionKey: holdsPart}
	for {
		page, err := p.holds.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entities {
			set.Add(e.RowKey)
		}
		if page.Next == nil {
			return set, nil
		}
		q.Resume = page.Next
	}
}
