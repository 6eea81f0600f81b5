package images

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/metadatad/metadatad/store"
)

// IndexRow is one row of the index, as the purge needs it: its address,
// the primary row it points to, and the version the backend stamped on it.
type IndexRow struct {
	store.Key
	// CameraID and RowKey address the primary row; CameraID is empty when
	// neither the keys nor the properties name one.
	CameraID, RowKey string
	ETag             string
	Timestamp        time.Time
}

// indexProperties are the properties that name an index row's primary row,
// read only when its keys do not.
var indexProperties = []string{PropDeviceID, PropMetadataRowKey}

// minuteDigits is the length of a capture minute, yyyyMMddHHmm
// (minuteLayout), at the start of every index partition key.
const (
	minuteDigits = 12
	minuteLayout = "200601021504"
)

// parseIndexKey tells the camera and primary row key of an index row from
// its keys alone, in either form an index holds: this service's
// <row key>_<camera> and the fleet's <camera>_<row key>. A row key is the
// inverted ticks of the capture instant, which lies in the partition's
// minute; a key whose halves read both ways (a camera id of 19 digits) is
// decided by which half falls in that minute. ok is false when neither or
// both do: the row's properties must tell.
func parseIndexKey(partitionKey, rowKey string) (cameraID, primaryRowKey string, ok bool) {
	var p keyParser
	return p.parse(partitionKey, rowKey)
}

// keyParser parses index keys, keeping the row-key range of the last
// partition's minute: a scan meets every row of a partition in a row.
type keyParser struct {
	partition string
	minute    store.Range
	valid     bool
}

func (p *keyParser) parse(partitionKey, rowKey string) (cameraID, primaryRowKey string, ok bool) {
	if partitionKey != p.partition {
		p.partition, p.valid = partitionKey, false
		if len(partitionKey) >= minuteDigits {
			if start, err := time.Parse(minuteLayout, partitionKey[:minuteDigits]); err == nil {
				end := start.Add(time.Minute)
				p.minute, p.valid = store.InvertedTicksRows(&start, &end), true
			}
		}
	}
	if !p.valid {
		return "", "", false
	}
	inMinute := func(key string) bool {
		if len(key) != len(p.minute.From) || key < p.minute.From || key >= p.minute.To {
			return false
		}
		for i := range len(key) {
			if key[i] < '0' || key[i] > '9' {
				return false
			}
		}
		return true
	}
	var own, fleet bool
	var ownCamera, ownRow, fleetCamera, fleetRow string
	if r, c, found := strings.Cut(rowKey, "_"); found && c != "" && inMinute(r) {
		own, ownCamera, ownRow = true, c, r
	}
	if i := strings.LastIndexByte(rowKey, '_'); i > 0 && inMinute(rowKey[i+1:]) {
		fleet, fleetCamera, fleetRow = true, rowKey[:i], rowKey[i+1:]
	}
	switch {
	case own && fleet && (ownCamera != fleetCamera || ownRow != fleetRow):
		return "", "", false
	case own:
		return ownCamera, ownRow, true
	case fleet:
		return fleetCamera, fleetRow, true
	}
	return "", "", false
}

// IndexScan reads the index rows of a range of partitions, a page at a
// time, by their keys alone while the keys tell the primary rows (see
// parseIndexKey). From a row whose keys do not, it reads the rows' DeviceId
// and MetadataRowKey as well, until a page no longer needs them: an index
// written by the fleet costs one more page, not a read per row.
type IndexScan struct {
	index  store.Table
	scan   store.Scan
	parser keyParser
	// withProperties is whether the next page reads indexProperties.
	withProperties bool
	done           bool
}

// Orphaned reports whether an index row has lost its primary row, the one
// test both purge designs' orphan passes make before deleting an index
// row: a row that names no camera is never judged one (it cannot be told
// from a row of another writer), one that names a camera but no primary
// row key is one (it cannot have a primary row), and any other is one when
// its primary row is not there. A read that fails is returned, not judged.
func (r *Repository) Orphaned(ctx context.Context, row IndexRow) (bool, error) {
	if row.CameraID == "" {
		return false, nil
	}
	if row.RowKey == "" {
		return true, nil
	}
	_, err := r.primary.Get(ctx, row.CameraID, row.RowKey)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	return false, err
}

// ScanIndex starts a scan of the index partitions in partitions, pages of
// up to pageSize rows (0: store.MaxPageSize).
func (r *Repository) ScanIndex(partitions store.Range, pageSize int) *IndexScan {
	return r.ScanIndexFrom(partitions, nil, pageSize)
}

// ScanIndexFrom is ScanIndex resumed where an earlier scan's Cursor was:
// nil starts at the beginning.
func (r *Repository) ScanIndexFrom(partitions store.Range, resume *store.Cursor, pageSize int) *IndexScan {
	return &IndexScan{index: r.index, scan: store.Scan{Partitions: partitions, Select: []string{}, Limit: pageSize, Resume: resume}}
}

// Cursor is where the scan's next page starts, for ScanIndexFrom to
// resume it; nil once Next has reported the end.
func (s *IndexScan) Cursor() *store.Cursor { return s.scan.Resume }

// Next returns the next page of rows, in key order, and false once the
// scan has nothing left. A page may be empty while rows remain.
func (s *IndexScan) Next(ctx context.Context) ([]IndexRow, bool, error) {
	if s.done {
		return nil, false, nil
	}
	scan := s.scan
	if s.withProperties {
		scan.Select = indexProperties
	}
	page, err := s.index.Scan(ctx, scan)
	if err != nil {
		return nil, false, err
	}
	rows := make([]IndexRow, 0, len(page.Entities))
	needed := false
	for _, e := range page.Entities {
		row := IndexRow{Key: store.Key{PartitionKey: e.PartitionKey, RowKey: e.RowKey}, ETag: e.ETag, Timestamp: e.Timestamp}
		if s.withProperties {
			row.CameraID, _ = e.Properties[PropDeviceID].(string)
			row.RowKey, _ = e.Properties[PropMetadataRowKey].(string)
		}
		if row.CameraID == "" || row.RowKey == "" {
			camera, rowKey, ok := s.parser.parse(e.PartitionKey, e.RowKey)
			switch {
			case ok:
				row.CameraID, row.RowKey = camera, rowKey
			case !s.withProperties:
				// Read this row and the rest of the page again, with properties.
				s.withProperties = true
				s.scan.Resume = &store.Cursor{PartitionKey: e.PartitionKey, RowKey: e.RowKey}
				return rows, true, nil
			default:
				needed = true
			}
		} else if _, _, ok := s.parser.parse(e.PartitionKey, e.RowKey); !ok {
			needed = true
		}
		rows = append(rows, row)
	}
	s.withProperties = s.withProperties && needed
	s.scan.Resume = page.Next
	s.done = page.Next == nil
	return rows, !s.done || len(rows) > 0, nil
}

// EachIndexRow calls visit for every index row in partitions, in key order.
func (r *Repository) EachIndexRow(ctx context.Context, partitions store.Range, visit func(IndexRow) error) error {
	scan := r.ScanIndex(partitions, 0)
	for {
		rows, more, err := scan.Next(ctx)
		if err != nil {
			return err
		}
		for _, row := range rows {
			if err := visit(row); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
	}
}

// ExpiredIndex is the range of index partitions that hold only rows
// captured before boundary's minute: one range whatever the cameras, since
// a sharded partition ("202601010000_3") sorts before the next minute.
func ExpiredIndex(boundary time.Time) store.Range {
	return store.Range{To: store.MinutePartitionKey(boundary)}
}

// ExpiredRows is the row range of a camera's primary rows captured before
// boundary.
func ExpiredRows(boundary time.Time) store.Range {
	return store.InvertedTicksRows(nil, &boundary)
}

// OldestIndexed is the capture minute of the oldest indexed rows, the next
// a purge would retire; false when the index is empty.
func (r *Repository) OldestIndexed(ctx context.Context) (time.Time, bool, error) {
	page, err := r.index.Scan(ctx, store.Scan{Limit: 1, Select: []string{}})
	if err != nil || len(page.Entities) == 0 {
		return time.Time{}, false, err
	}
	// Every row of a partition was captured in its minute, so only the
	// minute counts, whatever form its row key has.
	minute, err := time.Parse(minuteLayout, page.Entities[0].PartitionKey[:min(minuteDigits, len(page.Entities[0].PartitionKey))])
	if err != nil {
		return time.Time{}, false, fmt.Errorf("images: oldest index partition %q: %w", page.Entities[0].PartitionKey, err)
	}
	return minute, true, nil
}
