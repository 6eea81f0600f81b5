package pebble

import (
	"fmt"

	"github.com/metadatad/metadatad/store"
)

// DeleteUnread stages a point tombstone of the row, present or not
// (store.PurgeBatch): a purge deletes index rows this way, one per row it
// deletes, hundreds of thousands in a thinning's batch, so the table is
// resolved once for a run of calls on it and the key is built in a
// reused buffer (the batch copies it).
func (b *purgeBatch) DeleteUnread(table string, key store.Key) error {
	if table != b.unreadTable || b.unreadOwn == nil {
		own, err := b.untallied(table, "delete")
		if err != nil {
			return err
		}
		b.unreadTable, b.unreadOwn = table, own
	}
	own := b.unreadOwn
	if err := store.ValidateAddress(key.PartitionKey, key.RowKey); err != nil {
		return err
	}
	if err := b.beyond(own, "delete", key.PartitionKey, false); err != nil {
		return err
	}
	b.unreadKey = appendKey(b.unreadKey[:0], own.key, key.PartitionKey, key.RowKey)
	// Not noted in staged (a third of its cost at 500,000 keys): a later
	// Delete or Put of the key in this batch does not see it.
	if err := b.batch.Delete(b.unreadKey, nil); err != nil {
		return fmt.Errorf("pebble: delete: %w", err)
	}
	return nil
}
