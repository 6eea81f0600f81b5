package aztable

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/metadatad/metadatad/store"
)

// Query reads one partition in row-key order.
func (t *table) Query(ctx context.Context, q store.Query) (store.Page, error) {
	what := fmt.Sprintf("query partition %q", q.PartitionKey)
	f, ok := queryFilter(q)
	if !ok {
		return store.Page{}, ctxErr(ctx, what)
	}
	return t.selected(nil).page(ctx, what, f, q.Where, q.Limit)
}

// Scan reads a range of partitions in key order.
func (t *table) Scan(ctx context.Context, s store.Scan) (store.Page, error) {
	f, ok := scanFilter(s)
	if !ok {
		return store.Page{}, ctxErr(ctx, "scan")
	}
	return t.selected(s.Select).page(ctx, "scan", f, s.Where, s.Limit)
}

// selected is t reading only the keys, the timestamp and the named
// properties (the ETag comes with every entity), or every property with
// sel nil.
func (t *table) selected(sel []string) *pager {
	p := &pager{table: t}
	if sel != nil {
		s := strings.Join(append([]string{"PartitionKey", "RowKey", "Timestamp"}, sel...), ",")
		p.sel = &s
	}
	return p
}

// pager reads pages of one table, with an optional $select.
type pager struct {
	*table
	sel *string
}

// queryFilter is the $filter of a query: its partition, its row range from
// the later of Rows.From and the cursor, and its conditions. ok is false
// when the query can match nothing and needs no request.
func queryFilter(q store.Query) (_ filter, ok bool) {
	from := q.Rows.From
	if q.Resume != nil {
		from = max(from, q.Resume.RowKey)
	}
	if q.Rows.To != "" && from >= q.Rows.To {
		return nil, false
	}
	f := filter{"PartitionKey eq " + quote(q.PartitionKey)}
	return f.keyFrom("RowKey", from).keyTo("RowKey", q.Rows.To).where(q.Where), true
}

// scanFilter is the $filter of a scan: its partition range, starting at the
// cursor when it lies in the range, and its conditions. ok is false when the
// scan can match nothing.
func scanFilter(s store.Scan) (_ filter, ok bool) {
	from, to := s.Partitions.From, s.Partitions.To
	r := s.Resume
	if r != nil && r.PartitionKey < from {
		r = nil // a cursor before the range resumes nothing
	}
	switch {
	case to != "" && from >= to, r != nil && to != "" && r.PartitionKey >= to:
		return nil, false
	}
	var f filter
	switch {
	case r == nil:
		f = f.keyFrom("PartitionKey", from)
	case r.RowKey == "":
		f = f.keyFrom("PartitionKey", r.PartitionKey)
	default:
		// The rest of the cursor's partition, then the partitions after it.
		f = append(f, fmt.Sprintf("((PartitionKey eq %s and RowKey ge %s) or PartitionKey gt %s)",
			quote(r.PartitionKey), quote(r.RowKey), quote(r.PartitionKey)))
	}
	return f.keyTo("PartitionKey", to).where(s.Where), true
}

// page reads up to limit entities matching f, in the service's order, which
// for Azure Table Storage is key order.
//
// The service ends a page at 1,000 entities, at a partition boundary or
// after five seconds, with a continuation token; such a page may even be
// empty. page follows the tokens until it has limit entities and one more,
// or none remain: the one more is where Next resumes, a real key that
// callers can keep and compare, as the contract's cursor is (the service's
// tokens are opaque and need not be keys). A token may name a partition
// without a row; it is passed back as it came.
//
// where is checked again on each entity, type included: Azurite compares an
// Int32 property equal to a Double literal, and the contract does not.
func (t *pager) page(ctx context.Context, what string, f filter, where []store.Equal, limit int) (store.Page, error) {
	var entities []store.Entity
	opts := aztables.ListEntitiesOptions{Select: t.sel}
	if len(f) > 0 {
		s := f.String()
		opts.Filter = &s
	}
	for {
		if err := ctx.Err(); err != nil {
			return store.Page{}, fmt.Errorf("aztable: %s: %w", what, err)
		}
		top := int32(min(limit+1-len(entities), store.MaxPageSize))
		opts.Top = &top
		var raw *http.Response
		resp, err := t.client.NewListEntitiesPager(&opts).NextPage(runtime.WithCaptureResponse(ctx, &raw))
		if err != nil {
			return store.Page{}, serviceError(ctx, what, err)
		}
		got, err := decodeEntities(raw)
		if err != nil {
			return store.Page{}, err
		}
		for _, e := range got {
			if store.Matches(e.Properties, where) {
				entities = append(entities, e)
			}
		}
		more := resp.NextPartitionKey != nil && *resp.NextPartitionKey != "" ||
			resp.NextRowKey != nil && *resp.NextRowKey != ""
		if len(entities) > limit || !more {
			break
		}
		opts.NextPartitionKey, opts.NextRowKey = resp.NextPartitionKey, resp.NextRowKey
	}
	page := store.Page{Entities: entities}
	if len(entities) > limit {
		next := entities[limit]
		page.Entities = entities[:limit]
		page.Next = &store.Cursor{PartitionKey: next.PartitionKey, RowKey: next.RowKey}
	}
	return page, nil
}

// decodeEntities reads the entities of a list answer from its raw body.
func decodeEntities(raw *http.Response) ([]store.Entity, error) {
	payload, err := runtime.Payload(raw)
	if err != nil {
		return nil, fmt.Errorf("aztable: read list answer: %w", err)
	}
	var body struct {
		Value []json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(payload, &body); err != nil {
		return nil, fmt.Errorf("aztable: decode list answer: %w", err)
	}
	entities := make([]store.Entity, len(body.Value))
	for i, v := range body.Value {
		if entities[i], err = decodeEntity(v); err != nil {
			return nil, err
		}
	}
	return entities, nil
}

// ctxErr is the error of a read that needs no request: the context's, if done.
func ctxErr(ctx context.Context, what string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("aztable: %s: %w", what, err)
	}
	return nil
}
